//! Which environment variables a command inherits (spec 4.2).

/// The environment policy of a session's commands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum EnvPolicy {
    /// Everything except secrets (`*_API_KEY`, `*_SECRET`, `*_TOKEN`, `*_PASSWORD`,
    /// `*_CREDENTIAL`, case-insensitive).
    #[default]
    InheritAll,
    /// Only the core variables (PATH, HOME, locale, language toolchains).
    InheritCore,
    /// Nothing.
    InheritNone,
}

const SECRET_SUFFIXES: [&str; 5] = ["_API_KEY", "_SECRET", "_TOKEN", "_PASSWORD", "_CREDENTIAL"];

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

fn is_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_SUFFIXES.iter().any(|s| upper.ends_with(s))
}

impl EnvPolicy {
    /// The variables a command gets from `vars` under this policy. Secrets are dropped under
    /// every policy. Names and values need not be UTF-8 (`std::env::vars` panics on those); a
    /// name is matched by its lossy UTF-8 form, so an odd byte cannot hide a secret's suffix.
    pub fn filter<K, V>(self, vars: impl Iterator<Item = (K, V)>) -> Vec<(K, V)>
    where
        K: AsRef<std::ffi::OsStr>,
    {
        vars.filter(|(k, _)| {
            let name = k.as_ref().to_string_lossy();
            !is_secret(&name)
                && match self {
                    Self::InheritAll => true,
                    Self::InheritCore => CORE.contains(&name.as_ref()),
                    Self::InheritNone => false,
                }
        })
        .collect()
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
}
