//! Subagents (spec 7): a session's children are sessions of the same registry that record
//! their parent, spawned within the parent's depth and concurrency limits, in the parent's
//! directory or a subdirectory of it.
//!
//! A session reaches them through its [`Family`], never through the registry: the handle
//! knows whose it is, so it spawns children of that session only, finds only its children,
//! walks only its descendants, and reports only to its parent.

use super::build::NewSession;
use super::{Registry, Slot, crashed};
use crate::exec::ProtectedPaths;
use crate::session::{Error, History, Session, Template};
use crate::store::ParentLink;
use crate::tools::SpawnRequest;
use agentd_proto::{EventBody, SandboxMode, SessionId};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};

/// What a session may reach of the registry: its own children (to spawn, find, and stop
/// with their descendants) and its parent (to report to). The registry makes one for each
/// session it starts, naming that session, which no holder can change.
#[derive(Clone)]
pub(crate) struct Family {
    /// The session it belongs to.
    id: SessionId,
    /// Its parent and its depth below the top; `None` for a top-level session.
    parent: Option<ParentLink>,
    registry: Weak<Registry>,
}

impl Family {
    pub(super) fn new(registry: Weak<Registry>, id: SessionId, parent: Option<ParentLink>) -> Self {
        Self {
            id,
            parent,
            registry,
        }
    }

    fn registry(&self) -> Result<Arc<Registry>, Error> {
        self.registry.upgrade().ok_or(Error::ShuttingDown)
    }

    /// Creates a child of the session from `template` for `request`, not yet started.
    pub(crate) async fn spawn(
        &self,
        template: Template,
        request: SpawnRequest,
    ) -> Result<Arc<Session>, Error> {
        let depth = self.parent.as_ref().map_or(0, |p| p.depth);
        self.registry()?
            .spawn_child(&self.id, depth, template, request)
            .await
    }

    /// The session's child `id`, loaded if it was unloaded; `None` when `id` is not one of
    /// its children (nothing else is loaded).
    pub(crate) async fn child(&self, id: &SessionId) -> Option<Arc<Session>> {
        let registry = self.registry().ok()?;
        if registry.parent_of(id).as_ref() != Some(&self.id) {
            return None;
        }
        registry.get(id).await.ok()
    }

    /// The session's loaded children, their children, and so on: one list per generation.
    pub(crate) fn descendants(&self) -> Vec<Vec<Arc<Session>>> {
        let Ok(registry) = self.registry() else {
            return Vec::new();
        };
        let mut generations: Vec<Vec<Arc<Session>>> = Vec::new();
        let mut parents = vec![self.id.clone()];
        while !parents.is_empty() {
            let children: Vec<Arc<Session>> = parents
                .iter()
                .flat_map(|p| registry.children_of(p))
                .collect();
            parents = children.iter().map(|c| c.id().clone()).collect();
            if !children.is_empty() {
                generations.push(children);
            }
        }
        generations
    }

    /// Adds `body` to the parent's stream (loading the parent if it was unloaded); nothing
    /// for a top-level session.
    pub(crate) fn tell_parent(&self, body: EventBody) {
        let (Some(parent), Ok(registry)) = (&self.parent, self.registry()) else {
            return;
        };
        let parent = parent.session_id.clone();
        tokio::spawn(async move {
            if let Ok(parent) = registry.get(&parent).await {
                parent.notify(body).await;
            }
        });
    }
}

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
    async fn spawn_child(
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
        if let Some(name) = request.worktree() {
            self.child_worktree(parent, &mut template, &request, name)
                .await?;
        } else if let Some(dir) = &request.working_dir {
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
        let tree = template.worktree.clone();
        let started = async {
            let current = self.current_with_credentials().await?;
            self.start(
                &current,
                NewSession {
                    prepared: None,
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
        .await;
        // A worktree no session owns would stay forever; it is still clean.
        if let (Err(_), Some(tree)) = (&started, &tree)
            && let Err(e) =
                crate::worktree::remove(tree, self.local_options(&self.current.load().config)).await
        {
            tracing::warn!("the worktree of a subagent that did not start: {e}");
        }
        started
    }

    /// Gives the child `template` of `parent` a new worktree named `name` (agentd picks one
    /// when `None`) from the HEAD of the parent's directory, and makes it its directory. The
    /// child may write what a worktree session may, and not the parent's own worktree's
    /// administrative files. Refused for a read-only parent (adding a worktree writes a
    /// branch into the repository), beside a `working_dir`, and where `session/create`
    /// refuses a worktree.
    async fn child_worktree(
        &self,
        parent: &SessionId,
        template: &mut Template,
        request: &SpawnRequest,
        name: Option<&str>,
    ) -> Result<(), Error> {
        if request.working_dir.is_some() {
            return Err(Error::InvalidParams(
                "worktree: give either worktree or working_dir, not both: a worktree holds \
                 the whole repository"
                    .into(),
            ));
        }
        if template.read_only || template.config.sandbox == SandboxMode::ReadOnly {
            return Err(Error::InvalidParams(
                "worktree: a read-only session's subagents cannot have worktrees (adding one \
                 writes a branch into the repository)"
                    .into(),
            ));
        }
        let options = self.local_options(&self.current.load().config);
        let (tree, roots) = self
            .add_worktree(
                &template.environment,
                &template.cwd,
                name,
                &template.config,
                options,
            )
            .await?;
        let parents_tree = match self.sessions.get(parent).as_deref() {
            Some(Slot::Live(s)) => s.worktree().cloned(),
            _ => None,
        };
        let writable = &mut template.config.sandbox_writable_roots;
        if let Some(theirs) = parents_tree {
            let theirs = crate::worktree::writable_roots(Path::new(&theirs.path))
                .await
                .unwrap_or_default();
            writable.retain(|r| !theirs.contains(r));
        }
        for root in roots {
            if !writable.contains(&root) {
                writable.push(root);
            }
        }
        template.cwd = PathBuf::from(&tree.path);
        template.worktree = Some(tree);
        Ok(())
    }

    /// The loaded children of `parent`.
    fn children_of(&self, parent: &SessionId) -> Vec<Arc<Session>> {
        self.live()
            .into_iter()
            .filter(|s| s.parent_id() == Some(parent))
            .collect()
    }

    /// The parent of session `id` as its slot records it, without loading it.
    fn parent_of(&self, id: &SessionId) -> Option<SessionId> {
        match self.sessions.get(id).as_deref()? {
            Slot::Live(s) => s.parent_id().cloned(),
            Slot::Stored(r) | Slot::Busy(r, _) => r.parent.as_ref().map(|p| p.session_id.clone()),
            Slot::Damaged(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use agentd_proto::CreateParams;
    use agentd_proto::credentials::Credentials;

    fn family(session: &Session) -> Family {
        session.family.clone().unwrap()
    }

    async fn spawn(parent: &Arc<Session>) -> Arc<Session> {
        let request = SpawnRequest {
            task: "a task".into(),
            working_dir: None,
            model: None,
            max_turns: None,
            worktree: None,
            worktree_name: None,
        };
        family(parent)
            .spawn(parent.template(), request)
            .await
            .unwrap()
    }

    fn ids(generations: Vec<Vec<Arc<Session>>>) -> Vec<Vec<SessionId>> {
        generations
            .into_iter()
            .map(|g| {
                let mut ids: Vec<SessionId> = g.iter().map(|s| s.id().clone()).collect();
                ids.sort();
                ids
            })
            .collect()
    }

    fn sorted(mut ids: Vec<SessionId>) -> Vec<SessionId> {
        ids.sort();
        ids
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_session_reaches_only_its_own_children_and_their_descendants() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config::from_file_text("[session]\nmax_subagent_depth = 3\n")
            .unwrap()
            .with_credentials(Credentials {
                api_keys: [("anthropic".to_owned(), "k".to_owned())].into(),
            });
        let registry = Registry::new(config, None, ProtectedPaths::new(Vec::new(), None));
        let create = || {
            registry.create(CreateParams {
                cwd: dir.path().display().to_string(),
                ..CreateParams::default()
            })
        };
        let (top, other) = (create().await.unwrap(), create().await.unwrap());
        let (a, b) = (spawn(&top).await, spawn(&top).await);
        let a1 = spawn(&a).await;
        let o1 = spawn(&other).await;
        assert_eq!(
            a1.parent_id(),
            Some(a.id()),
            "a child's family spawns its children"
        );

        let of_a = family(&a);
        assert!(Arc::ptr_eq(&of_a.child(a1.id()).await.unwrap(), &a1));
        for stranger in [&top, &a, &b, &other, &o1] {
            assert!(
                of_a.child(stranger.id()).await.is_none(),
                "{} is not a child of {}",
                stranger.id(),
                a.id()
            );
        }
        assert!(
            family(&top).child(a1.id()).await.is_none(),
            "a grandchild is not a child"
        );
        assert_eq!(
            ids(family(&top).descendants()),
            [
                sorted(vec![a.id().clone(), b.id().clone()]),
                vec![a1.id().clone()]
            ]
        );
        assert_eq!(ids(of_a.descendants()), [[a1.id().clone()]]);
        assert_eq!(ids(family(&b).descendants()), Vec::<Vec<SessionId>>::new());
        assert_eq!(ids(family(&other).descendants()), [[o1.id().clone()]]);
        registry.shutdown().await;
    }
}
