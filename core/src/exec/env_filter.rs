//! Which environment variables a command inherits (spec 4.2): an [`EnvPolicy`] picks the
//! variables, then an [`EnvFilter`] drops the secrets among them, under every policy.

/// The environment policy of a session's commands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum EnvPolicy {
    /// Everything except secrets.
    #[default]
    InheritAll,
    /// Only the core variables (PATH, HOME, locale, language toolchains).
    InheritCore,
    /// Nothing.
    InheritNone,
}

/// Names of credentials, matched case-insensitively; `*` matches any run of characters. The
/// spec's suffixes (`*_API_KEY`, `*_SECRET`, `*_TOKEN`, `*_PASSWORD`, `*_CREDENTIAL`) widened
/// to the names credentials commonly go by, so a key never reaches a tool because of its
/// spelling (`AWS_SECRET_ACCESS_KEY`, `GITHUB_TOKEN`, `PGPASSWORD`, `GOOGLE_APPLICATION_CREDENTIALS`).
pub(crate) const DEFAULT_SECRET_PATTERNS: &[&str] = &[
    "*SECRET*",
    "*TOKEN*",
    "*PASSWORD*",
    "*PASSWD*",
    "*PASSPHRASE*",
    "*CREDENTIAL*",
    "*_PWD",
    "*_PASS",
    "*JWT*",
    "*COOKIE*",
    "*APIKEY*",
    "*API_KEY*",
    "*ACCESS_KEY*",
    "*PRIVATE_KEY*",
    "*SECRET_KEY*",
    "*SIGNING_KEY*",
    "*ENCRYPTION_KEY*",
    "*MASTER_KEY*",
    "*LICENSE_KEY*",
    "*SESSION_KEY*",
    "*AUTH_KEY*",
    // The `*_KEY` of services whose keys are commonly kept in the environment.
    "ANTHROPIC_*KEY*",
    "OPENAI_*KEY*",
    "GEMINI_*KEY*",
    "GOOGLE_*KEY*",
    "AZURE_*KEY*",
    "AWS_*KEY*",
    "MISTRAL_*KEY*",
    "GROQ_*KEY*",
    "COHERE_*KEY*",
    "DEEPSEEK_*KEY*",
    "XAI_*KEY*",
    "OPENROUTER_*KEY*",
    "TOGETHER_*KEY*",
    "FIREWORKS_*KEY*",
    "PERPLEXITY_*KEY*",
    "HF_*KEY*",
    "HUGGINGFACE_*KEY*",
    "REPLICATE_*KEY*",
    "STRIPE_*KEY*",
    "TWILIO_*KEY*",
    "SENDGRID_*KEY*",
    "MAILGUN_*KEY*",
    "SLACK_*KEY*",
    "DATADOG_*KEY*",
    "DD_*KEY*",
    "SENTRY_*KEY*",
    "SENTRY_DSN",
    "CLOUDFLARE_*KEY*",
    "DIGITALOCEAN_*KEY*",
    "HEROKU_*KEY*",
    "VERCEL_*KEY*",
    "NETLIFY_*KEY*",
    "ALGOLIA_*KEY*",
    "FIREBASE_*KEY*",
    "SUPABASE_*KEY*",
    "PINECONE_*KEY*",
    "LINEAR_*KEY*",
    "NOTION_*KEY*",
];

const CORE: [&str; 22] = [
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TERM",
    "TMPDIR",
    "TZ",
    "GOPATH",
    "GOROOT",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "NVM_DIR",
    "PYENV_ROOT",
    "VIRTUAL_ENV",
    "JAVA_HOME",
    "XDG_RUNTIME_DIR",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
];

/// Whether `name` matches `pattern` (`*` matches any run, including none), both already
/// upper-case.
fn matches(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        // No `*`: the whole name.
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// The variables a session's commands get: the policy's choice minus secrets. Secrets are the
/// names matching [`DEFAULT_SECRET_PATTERNS`] or the configured patterns (`[tools] env_deny`),
/// except the names configured as allowed (`[tools] env_allow`), and always the names the
/// daemon reads keys from (every provider's `api_key_env`), which no allowance lets through.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct EnvFilter {
    policy: EnvPolicy,
    /// Upper-case patterns: the defaults, then the configured ones.
    deny: Vec<String>,
    /// Upper-case names let through despite a pattern.
    allow: Vec<String>,
    /// Upper-case names never let through.
    keys: Vec<String>,
}

impl EnvFilter {
    /// `policy` with the default secret patterns.
    pub(crate) fn new(policy: EnvPolicy) -> Self {
        Self {
            policy,
            deny: DEFAULT_SECRET_PATTERNS
                .iter()
                .map(|p| p.to_string())
                .collect(),
            allow: Vec::new(),
            keys: Vec::new(),
        }
    }

    /// Adds patterns to drop (`*` wildcards), names to keep despite a pattern, and names that
    /// hold keys (dropped whatever else is configured).
    pub(crate) fn with(
        mut self,
        deny: &[String],
        allow: &[String],
        keys: impl IntoIterator<Item = impl AsRef<str>>,
    ) -> Self {
        self.deny
            .extend(deny.iter().map(|p| p.to_ascii_uppercase()));
        self.allow
            .extend(allow.iter().map(|n| n.to_ascii_uppercase()));
        self.keys
            .extend(keys.into_iter().map(|k| k.as_ref().to_ascii_uppercase()));
        self
    }

    fn is_secret(&self, name: &str) -> bool {
        let upper = name.to_ascii_uppercase();
        if self.keys.contains(&upper) {
            return true;
        }
        !self.allow.contains(&upper) && self.deny.iter().any(|p| matches(p, &upper))
    }

    /// The variables a command gets from `vars`. Secrets are dropped under every policy.
    /// Names and values need not be UTF-8 (`std::env::vars` panics on those); a name is
    /// matched by its lossy UTF-8 form, so an odd byte cannot hide a secret's name.
    pub(crate) fn filter<K, V>(&self, vars: impl Iterator<Item = (K, V)>) -> Vec<(K, V)>
    where
        K: AsRef<std::ffi::OsStr>,
    {
        vars.filter(|(k, _)| {
            let name = k.as_ref().to_string_lossy();
            !self.is_secret(&name)
                && match self.policy {
                    EnvPolicy::InheritAll => true,
                    EnvPolicy::InheritCore => CORE.contains(&name.as_ref()),
                    EnvPolicy::InheritNone => false,
                }
        })
        .collect()
    }
}

impl EnvPolicy {
    /// The variables a command gets from `vars` under this policy and the default secret
    /// patterns (`DEFAULT_SECRET_PATTERNS`).
    pub fn filter<K, V>(self, vars: impl Iterator<Item = (K, V)>) -> Vec<(K, V)>
    where
        K: AsRef<std::ffi::OsStr>,
    {
        EnvFilter::new(self).filter(vars)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(policy: EnvPolicy, input: &[(&str, &str)], expect: &[&str]) {
        let vars = input.iter().map(|(k, v)| (k.to_string(), v.to_string()));
        let got: Vec<String> = policy.filter(vars).into_iter().map(|(k, _)| k).collect();
        assert_eq!(got, expect);
    }

    #[test]
    fn names_and_values_need_not_be_utf8() {
        use std::ffi::OsString;
        use std::os::unix::ffi::OsStringExt;
        let vars = [
            (
                OsString::from("PATH"),
                OsString::from_vec(b"/bin:\xff".to_vec()),
            ),
            (OsString::from_vec(b"X\xff".to_vec()), OsString::from("v")),
            (
                OsString::from_vec(b"\xffMY_API_KEY".to_vec()),
                OsString::from("k"),
            ),
        ];
        let got = EnvPolicy::InheritAll.filter(vars.clone().into_iter());
        assert_eq!(got, vars[..2]);
    }

    #[test]
    fn secrets_are_dropped_case_insensitively() {
        let input = [
            ("PATH", "/bin"),
            ("ANTHROPIC_API_KEY", "k"),
            ("github_token", "t"),
            ("DB_PASSWORD", "p"),
            ("AWS_SECRET", "s"),
            ("GCP_CREDENTIAL", "c"),
            ("EDITOR", "vi"),
            ("CARGO_HOME", "/c"),
        ];
        check(
            EnvPolicy::InheritAll,
            &input,
            &["PATH", "EDITOR", "CARGO_HOME"],
        );
        check(EnvPolicy::InheritCore, &input, &["PATH", "CARGO_HOME"]);
        check(EnvPolicy::InheritNone, &input, &[]);
    }

    #[test]
    fn common_credential_names_are_secrets() {
        let input = [
            ("AWS_SECRET_ACCESS_KEY", "s"),
            ("AWS_ACCESS_KEY_ID", "a"),
            ("AWS_SESSION_TOKEN", "t"),
            ("GITHUB_TOKEN", "g"),
            ("GH_TOKEN", "g"),
            ("NPM_TOKEN", "n"),
            ("GOOGLE_APPLICATION_CREDENTIALS", "/k.json"),
            ("AZURE_CLIENT_SECRET", "c"),
            ("PGPASSWORD", "p"),
            ("MYSQL_PWD", "p"),
            ("OPENAI_KEY", "k"),
            ("STRIPE_SECRET_KEY", "k"),
            ("SSH_PRIVATE_KEY_PATH", "k"),
            ("PWD", "/w"),
            ("OLDPWD", "/v"),
            ("AWS_REGION", "eu"),
            ("KEYTIMEOUT", "1"),
            ("HOME", "/h"),
        ];
        check(
            EnvPolicy::InheritAll,
            &input,
            &["PWD", "OLDPWD", "AWS_REGION", "KEYTIMEOUT", "HOME"],
        );
    }

    #[test]
    fn configured_names_are_added_and_allowed() {
        let filter = EnvFilter::new(EnvPolicy::InheritAll).with(
            &["corp_*".into(), "EXACT".into()],
            &["TOKENIZERS_PARALLELISM".into(), "MY_LLM_KEY".into()],
            ["my_llm_key"],
        );
        let vars = [
            "CORP_DB",
            "exact",
            "EXACTLY",
            "TOKENIZERS_PARALLELISM",
            "MY_LLM_KEY",
            "GITHUB_TOKEN",
            "EDITOR",
        ]
        .map(|k| (k.to_owned(), String::new()));
        let got: Vec<String> = filter
            .filter(vars.into_iter())
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        // A key the daemon uses stays out even when allowed by mistake.
        assert_eq!(got, ["EXACTLY", "TOKENIZERS_PARALLELISM", "EDITOR"]);
    }

    #[test]
    fn patterns_match_whole_names() {
        let cases = [
            ("*TOKEN*", "TOKEN", true),
            ("*TOKEN*", "MY_TOKEN_FILE", true),
            ("*_PWD", "PWD", false),
            ("*_PWD", "MYSQL_PWD", true),
            ("A*B*C", "ABC", true),
            ("A*B*C", "AXBXCX", false),
            ("A*A", "A", false),
            ("NAME", "NAME", true),
            ("NAME", "NAMES", false),
        ];
        for (pattern, name, expect) in cases {
            assert_eq!(matches(pattern, name), expect, "{pattern} vs {name}");
        }
    }
}
