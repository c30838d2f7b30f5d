//! The config new sessions are made from ([`Current`]): it can change while the daemon runs.
//! A reload (`daemon/reload`, SIGHUP) replaces it, and every create looks at the credentials
//! file first, so a key stored by `agentctl login` applies from the next session on. A running
//! session keeps the config and providers it was made with.

use super::{Registry, crashed};
use crate::config::{Config, Price};
use crate::llm::{ProviderFactory, ProviderSet};
use crate::session::Error;
use std::collections::BTreeMap;
use std::sync::Arc;

/// What new sessions are made from: the config (with the credentials file's keys applied),
/// a client for every usable provider, and the prices. Replaced whole, never changed.
pub(super) struct Current {
    /// The config.
    pub(super) config: Arc<Config>,
    pub(super) providers: ProviderSet,
    pub(super) prices: Arc<BTreeMap<String, Price>>,
}

impl Current {
    pub(super) fn new(factory: &ProviderFactory, config: Config) -> Self {
        let providers = factory.build(&config);
        Self {
            prices: Arc::new(config.pricing.clone()),
            config: Arc::new(config),
            providers,
        }
    }
}

impl Registry {
    /// The config new sessions are made from now.
    pub(super) fn current(&self) -> Arc<Current> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The daemon configuration now.
    pub fn config(&self) -> Arc<Config> {
        self.current().config.clone()
    }

    /// The config a new session would be made from now: [`Registry::config`] with the
    /// credentials file as it is now; an unreadable credentials file leaves the keys as they
    /// were (the next create fails with its reason).
    pub async fn config_with_credentials(&self) -> Arc<Config> {
        match self.current_with_credentials().await {
            Ok(current) => current.config.clone(),
            Err(_) => self.config(),
        }
    }

    /// Replaces `seen` with `next` unless something else replaced it first; `false` then.
    fn swap(&self, seen: &Arc<Current>, next: Arc<Current>) -> bool {
        let mut slot = self.current.write().unwrap_or_else(|e| e.into_inner());
        if !Arc::ptr_eq(&slot, seen) {
            return false;
        }
        *slot = next;
        true
    }

    /// The config for a new session, with the credentials file as it is now: a key stored or
    /// removed by `agentctl login`/`logout` since the last look applies from here on. The file
    /// is read off the async workers, and no lock is held while it is.
    pub(super) async fn current_with_credentials(&self) -> Result<Arc<Current>, Error> {
        let Some(path) = self.current().config.credentials_path.clone() else {
            return Ok(self.current());
        };
        let creds = tokio::task::spawn_blocking(move || crate::config::read_credentials(&path))
            .await
            .map_err(crashed)?
            .map_err(|e| Error::InvalidConfig(e.to_string()))?;
        loop {
            let seen = self.current();
            if seen.config.credentials == creds {
                return Ok(seen);
            }
            let next = Arc::new(Current::new(
                &self.factory,
                seen.config.with_credentials(creds.clone()),
            ));
            if self.swap(&seen, next.clone()) {
                tracing::info!("the credentials file changed; new sessions use its keys");
                return Ok(next);
            }
        }
    }

    /// Reads the config and credentials files again; new sessions get the result, running
    /// ones keep what they have. On an error the config in use stays. Returns the new config
    /// and the keys that changed but apply only at the next start.
    pub async fn reload(&self) -> Result<(Arc<Config>, Vec<String>), crate::config::Error> {
        let old = self.current().config.clone();
        let loaded = {
            let old = old.clone();
            tokio::task::spawn_blocking(move || old.reload())
                .await
                .map_err(|e| crate::config::Error::Invalid(format!("the reload crashed: {e}")))?
        }?;
        let mut restart_needed = Vec::new();
        if loaded.server != old.server {
            restart_needed.push("server".to_owned());
        }
        if loaded.log_level != old.log_level {
            restart_needed.push("log_level".to_owned());
        }
        if loaded.evict_idle_after != old.evict_idle_after {
            restart_needed.push("daemon.evict_idle_secs".to_owned());
        }
        let next = Arc::new(Current::new(&self.factory, loaded));
        // A reload wins over whatever replaced the config meanwhile: it read every file last.
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = next.clone();
        Ok((next.config.clone(), restart_needed))
    }
}
