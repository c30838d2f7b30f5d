//! The config new sessions are made from ([`Current`]): it can change while the daemon runs.
//! A reload (`daemon/reload`, SIGHUP) replaces it, and every create looks at the credentials
//! file first, so a key stored by `agentctl login` applies from the next session on. A running
//! session keeps the config and providers it was made with.
//!
//! It sits in an [`ArcSwap`]: reading it takes no lock, a reload stores a new one, and a
//! credentials change is swapped in over the one it was made from only, so it never undoes a
//! reload that landed meanwhile.

use super::{Registry, crashed};
use crate::config::{Config, Price};
use crate::llm::{ProviderFactory, ProviderSet};
use crate::session::Error;
use agentd_proto::credentials::Credentials;
use arc_swap::{ArcSwap, Guard};
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

/// The [`Current`] in use, and what makes new ones.
pub(super) struct CurrentCell {
    current: ArcSwap<Current>,
    /// Builds providers; they share its HTTP client (one connection pool).
    factory: ProviderFactory,
}

impl CurrentCell {
    pub(super) fn new(config: Config) -> Self {
        let factory = ProviderFactory::default();
        Self {
            current: ArcSwap::from_pointee(Self::make(&factory, config)),
            factory,
        }
    }

    fn make(factory: &ProviderFactory, config: Config) -> Current {
        Current {
            providers: factory.build(&config),
            prices: Arc::new(config.pricing.clone()),
            config: Arc::new(config),
        }
    }

    /// The one in use now.
    pub(super) fn load(&self) -> Arc<Current> {
        self.current.load_full()
    }

    /// Replaces it with one made from `config`, whatever replaced it meanwhile: a reload
    /// read every file last.
    pub(super) fn replace(&self, config: Config) -> Arc<Current> {
        let next = Arc::new(Self::make(&self.factory, config));
        self.current.store(next.clone());
        next
    }

    /// The one in use with `creds` as the credentials file's keys: itself when it has them,
    /// else a new one made from it and swapped in only if nothing replaced it meanwhile (a
    /// reload that lands first is kept, and the keys applied to it).
    pub(super) fn with_credentials(&self, creds: &Credentials) -> Arc<Current> {
        let mut seen = self.load();
        loop {
            if seen.config.credentials == *creds {
                return seen;
            }
            let next = Arc::new(Self::make(
                &self.factory,
                seen.config.with_credentials(creds.clone()),
            ));
            let before = self.current.compare_and_swap(&seen, next.clone());
            if Arc::ptr_eq(&before, &seen) {
                tracing::info!("the credentials file changed; new sessions use its keys");
                return next;
            }
            seen = Guard::into_inner(before);
        }
    }
}

impl Registry {
    /// The daemon configuration now.
    pub fn config(&self) -> Arc<Config> {
        self.current.load().config.clone()
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

    /// The config for a new session, with the credentials file as it is now: a key stored or
    /// removed by `agentctl login`/`logout` since the last look applies from here on. The file
    /// is read off the async workers.
    pub(super) async fn current_with_credentials(&self) -> Result<Arc<Current>, Error> {
        let current = self.current.load();
        let Some(path) = current.config.credentials_path.clone() else {
            return Ok(current);
        };
        let creds = tokio::task::spawn_blocking(move || crate::config::read_credentials(&path))
            .await
            .map_err(crashed)?
            .map_err(|e| Error::InvalidConfig(e.to_string()))?;
        Ok(self.current.with_credentials(&creds))
    }

    /// Reads the config and credentials files again; new sessions get the result, running
    /// ones keep what they have. On an error the config in use stays. Returns the new config
    /// and the keys that changed but apply only at the next start.
    pub async fn reload(&self) -> Result<(Arc<Config>, Vec<String>), crate::config::Error> {
        let old = self.current.load().config.clone();
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
        let next = self.current.replace(loaded);
        Ok((next.config.clone(), restart_needed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    /// A config told apart from others by `marker`, as a reload that read new files would be.
    fn config(marker: usize) -> Config {
        let mut config = Config::from_file_text("").unwrap();
        config.log_level = marker.to_string();
        config
    }

    fn marker(current: &Current) -> usize {
        current.config.log_level.parse().unwrap()
    }

    fn keys(key: &str) -> Credentials {
        Credentials {
            api_keys: [("anthropic".to_owned(), key.to_owned())].into(),
        }
    }

    #[test]
    fn new_keys_apply_over_a_reload_that_landed_first_and_the_same_keys_change_nothing() {
        let cell = CurrentCell::new(config(0));
        // The credentials file was read, then a reload landed before the keys were applied.
        cell.replace(config(1));
        let got = cell.with_credentials(&keys("a"));
        assert_eq!(marker(&got), 1, "the reload is kept");
        assert_eq!(got.config.credentials, keys("a"));
        let key = got.config.providers["anthropic"].api_key.as_ref();
        assert_eq!(key.map(crate::config::ApiKey::expose), Some("a"));
        assert!(
            got.providers.get("anthropic").is_some(),
            "a client for the key"
        );
        assert!(Arc::ptr_eq(&got, &cell.load()), "swapped in");
        let again = cell.with_credentials(&keys("a"));
        assert!(Arc::ptr_eq(&again, &got), "unchanged keys swap nothing in");
    }

    #[test]
    fn concurrent_reloads_and_credentials_refreshes_never_undo_each_other() {
        let cell = CurrentCell::new(config(0));
        let reloading = AtomicBool::new(true);
        let refreshes = AtomicUsize::new(0);
        let (undone, wrong_keys) = std::thread::scope(|s| {
            let refresher = s.spawn(|| {
                let mut wrong = 0;
                for i in 0usize.. {
                    if !reloading.load(Ordering::Acquire) {
                        break;
                    }
                    let creds = keys(if i % 2 == 0 { "a" } else { "b" });
                    if cell.with_credentials(&creds).config.credentials != creds {
                        wrong += 1;
                    }
                    refreshes.fetch_add(1, Ordering::AcqRel);
                }
                wrong
            });
            let mut undone = Vec::new();
            for n in 1..=200 {
                cell.replace(config(n));
                // Once a refresh that may have begun before the reload has ended, and one
                // more after it, the config is still the reload's: keys apply over it.
                let after = refreshes.load(Ordering::Acquire) + 2;
                while refreshes.load(Ordering::Acquire) < after {
                    std::thread::yield_now();
                }
                let seen = marker(&cell.load());
                if seen != n {
                    undone.push((n, seen));
                }
            }
            reloading.store(false, Ordering::Release);
            (undone, refresher.join().unwrap())
        });
        assert_eq!(
            undone,
            Vec::new(),
            "reloads undone by a refresh: (reload, seen)"
        );
        assert_eq!(wrong_keys, 0, "refreshes that returned other keys");
    }
}
