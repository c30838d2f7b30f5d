//! Subagents (spec 7): a session's children are sessions of the same registry that record
//! their parent, spawned within the parent's depth and concurrency limits, in the parent's
//! directory or a subdirectory of it.

use super::build::NewSession;
use super::{Registry, crashed};
use crate::exec::ProtectedPaths;
use crate::session::{Error, History, Session, Template};
use crate::store::ParentLink;
use crate::tools::SpawnRequest;
use agentd_proto::{SandboxMode, SessionId};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The real path of a subagent's working directory `cwd` (`dir` as the model gave it,
/// beneath the parent's directory `parent`): opened as a directory and read back from the
/// open descriptor, so the check and the child see the same directory. Under a sandbox it
/// must lie inside the parent's writable roots (its directory, plus `sandbox_writable_roots`
/// in `workspace_write`), so a symlink cannot send the child, and its writes, elsewhere; it
/// may never be one of agentd's own directories.
fn child_directory(
    dir: &str,
    cwd: &Path,
    parent: &Path,
    config: &agentd_proto::SessionConfig,
    protected: &ProtectedPaths,
) -> Result<PathBuf, Error> {
    let real = crate::exec::opened_real_path(cwd, true, protected).map_err(|e| {
        Error::InvalidParams(format!(
            "working_dir {dir:?} must be an existing subdirectory of {}: {e}",
            parent.display()
        ))
    })?;
    let mut roots = vec![parent.to_owned()];
    match config.sandbox {
        SandboxMode::Off => return Ok(real),
        SandboxMode::ReadOnly => {}
        SandboxMode::WorkspaceWrite => roots.extend(config.sandbox_writable_roots.clone()),
    }
    let roots: Vec<PathBuf> = roots
        .iter()
        .filter_map(|r| std::fs::canonicalize(r).ok())
        .collect();
    if roots.iter().any(|root| real.starts_with(root)) {
        return Ok(real);
    }
    let shown: Vec<String> = roots.iter().map(|r| r.display().to_string()).collect();
    Err(Error::InvalidParams(format!(
        "working_dir {dir:?} leads to {}, outside the writable roots of this session ({}); \
         a subagent works only inside them",
        real.display(),
        shown.join(", ")
    )))
}

impl Registry {
    /// Creates a subagent of the session `parent` (at `depth`) for `request`, not yet
    /// started, within the parent's depth and concurrency limits. The child works on the same
    /// filesystem with its own execution environment, so aborting one session kills only its
    /// own processes.
    pub(crate) async fn spawn_child(
        &self,
        parent: &SessionId,
        depth: u32,
        mut template: Template,
        request: SpawnRequest,
    ) -> Result<Arc<Session>, Error> {
        let config = &template.config;
        if depth + 1 > config.max_subagent_depth {
            return Err(Error::InvalidParams(format!(
                "cannot spawn a subagent: max_subagent_depth is {} and this session is at depth {depth}; do the task yourself",
                config.max_subagent_depth,
            )));
        }
        let working = self
            .children_of(parent)
            .iter()
            .filter(|c| c.state().is_working())
            .count();
        if working >= config.max_concurrent_subagents as usize {
            return Err(Error::InvalidParams(format!(
                "cannot spawn a subagent: {working} are working (max_concurrent_subagents = {}); wait for one first",
                config.max_concurrent_subagents
            )));
        }
        if let Some(dir) = &request.working_dir {
            let path = std::path::Path::new(dir);
            let inside = path.components().all(|c| {
                matches!(
                    c,
                    std::path::Component::Normal(_) | std::path::Component::CurDir
                )
            });
            if !inside {
                return Err(Error::InvalidParams(format!(
                    "working_dir {dir:?} must be an existing subdirectory of {}",
                    template.cwd.display()
                )));
            }
            let cwd = template.cwd.join(path);
            // A remote directory is checked by the child's environment when it connects.
            let cwd = if template.environment.is_local() {
                let (config, parent, protected) = (
                    template.config.clone(),
                    template.cwd.clone(),
                    self.protected.clone(),
                );
                let dir = dir.clone();
                tokio::task::spawn_blocking(move || {
                    child_directory(&dir, &cwd, &parent, &config, &protected)
                })
                .await
                .map_err(crashed)??
            } else {
                cwd
            };
            // The child works in a part of its parent's tree and may write where it may.
            let parent_cwd = std::mem::replace(&mut template.cwd, cwd);
            template.config.sandbox_writable_roots.push(parent_cwd);
        }
        if let Some(model) = request.model {
            template.config.model = model;
        }
        template.config.max_turns = request.max_turns.unwrap_or(0);
        let title: String = request.task.chars().take(60).collect();
        let current = self.current_with_credentials().await?;
        self.start(
            &current,
            NewSession {
                template,
                title: Some(format!("subagent: {title}")),
                history: History::default(),
                forked_from: None,
                parent: Some(ParentLink {
                    session_id: parent.clone(),
                    depth: depth + 1,
                }),
            },
        )
        .await
    }

    /// The loaded children of `parent`.
    pub(crate) fn children_of(&self, parent: &SessionId) -> Vec<Arc<Session>> {
        self.live()
            .into_iter()
            .filter(|s| s.parent_id() == Some(parent))
            .collect()
    }
}
