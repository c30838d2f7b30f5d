//! The YAML frontmatter of `SKILL.md` and command files, read leniently: valid YAML through
//! serde-saphyr, and, where a file in the wild is not valid YAML (an unquoted `: ` in a
//! description is the usual case), its top-level `key: value` lines one by one, with a
//! warning, as other clients do.

use serde::Deserialize;

/// The fields agentd uses; the spec's others (`license`, `compatibility`, `metadata`,
/// `allowed-tools`) are kept in the file and ignored.
#[derive(Debug, Default, PartialEq, Deserialize)]
pub(super) struct Frontmatter {
    #[serde(default, deserialize_with = "text")]
    pub(super) name: Option<String>,
    #[serde(default, deserialize_with = "text")]
    pub(super) description: Option<String>,
    #[serde(default, deserialize_with = "text", rename = "argument-hint")]
    pub(super) argument_hint: Option<String>,
    #[serde(default, deserialize_with = "text")]
    pub(super) compatibility: Option<String>,
}

/// A scalar of any type as text (`name: 2024` is a number to YAML); anything else is absent.
fn text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Scalar {
        Text(String),
        Int(i64),
        Float(f64),
        Bool(bool),
        Other(serde::de::IgnoredAny),
    }
    Ok(match Scalar::deserialize(d)? {
        Scalar::Text(s) => Some(s),
        Scalar::Int(n) => Some(n.to_string()),
        Scalar::Float(n) => Some(n.to_string()),
        Scalar::Bool(b) => Some(b.to_string()),
        Scalar::Other(_) => None,
    })
}

/// A file split into its frontmatter (`None` when it has none) and its body.
pub(super) struct Split<'a> {
    pub(super) yaml: Option<&'a str>,
    pub(super) body: &'a str,
}

/// Splits `text` at the `---` lines that open and close its frontmatter.
pub(super) fn split(text: &str) -> Split<'_> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return Split {
            yaml: None,
            body: text,
        };
    };
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return Split {
                yaml: Some(&rest[..offset]),
                body: &rest[offset + line.len()..],
            };
        }
        offset += line.len();
    }
    // No closing line: not frontmatter.
    Split {
        yaml: None,
        body: text,
    }
}

/// Parses frontmatter; the warning says when the lenient reading was needed.
pub(super) fn parse(yaml: &str) -> (Frontmatter, Option<String>) {
    if let Some(front) = plain(yaml) {
        return (front, None);
    }
    match serde_saphyr::from_str::<Option<Frontmatter>>(yaml) {
        Ok(front) => (front.unwrap_or_default(), None),
        Err(e) => {
            let first = e.to_string();
            let first = first.lines().next().unwrap_or_default().to_owned();
            (
                by_lines(yaml),
                Some(format!(
                    "its frontmatter is not valid YAML ({first}); its top-level lines were read one by one"
                )),
            )
        }
    }
}

/// The frontmatter most files have, read without a YAML parser: `key: value` lines whose
/// values are plain text or quoted without escapes, and maps of such lines one level deep
/// (`metadata:`). Anything else (a number, a folded or multi-line string, a list, a comment
/// after a value, a key twice) is `None`, for serde-saphyr to read: this reading must agree
/// with it wherever it answers (`plain_agrees_with_yaml`).
fn plain(yaml: &str) -> Option<Frontmatter> {
    const MAX_PLAIN_KEYS: usize = 32;
    let mut front = Frontmatter::default();
    let mut seen: Vec<&str> = Vec::new();
    // Inside a map: its lines' indent, and the keys seen in it.
    let mut map: Option<(usize, Vec<&str>)> = None;
    let mut opened = false;
    for line in yaml.lines() {
        let content = line.trim_start_matches(' ');
        if content.is_empty() || content.starts_with('#') {
            continue;
        }
        let indent = line.len() - content.len();
        let (key, value) = pair(content)?;
        // Keys are compared with the ones seen: past a few, the parser is cheaper.
        if seen.len() + map.as_ref().map_or(0, |(_, keys)| keys.len()) > MAX_PLAIN_KEYS {
            return None;
        }
        if indent > 0 {
            // A map's lines, all at its first line's indent.
            match (&mut map, opened) {
                (None, true) => map = Some((indent, vec![key])),
                (Some((at, keys)), _) if *at == indent && !keys.contains(&key) => keys.push(key),
                _ => return None,
            }
            value?;
            opened = false;
            continue;
        }
        if opened || seen.contains(&key) {
            // A key without a value and without a map under it, or a key twice.
            return None;
        }
        seen.push(key);
        map = None;
        let slot = match key {
            "name" => &mut front.name,
            "description" => &mut front.description,
            "argument-hint" => &mut front.argument_hint,
            "compatibility" => &mut front.compatibility,
            _ => {
                opened = value.is_none();
                continue;
            }
        };
        *slot = Some(value?.to_owned());
    }
    (!opened).then_some(front)
}

/// `key: value` (a value of `None` for `key:` alone), when both are plain.
fn pair(line: &str) -> Option<(&str, Option<&str>)> {
    if line.contains('\t') {
        return None;
    }
    let (key, value) = match line.split_once(": ") {
        Some((key, value)) => (key, Some(value.trim_end_matches(' '))),
        None => (line.strip_suffix(':')?, None),
    };
    if key.is_empty()
        || !key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        || key.starts_with('-')
    {
        return None;
    }
    match value {
        None | Some("") => Some((key, None)),
        Some(value) => Some((key, Some(scalar(value)?))),
    }
}

/// A value's text when YAML reads it as that text: plain words, or quoted without escapes.
fn scalar(value: &str) -> Option<&str> {
    for quote in ['"', '\''] {
        if let Some(inner) = value.strip_prefix(quote) {
            let inner = inner.strip_suffix(quote)?;
            return (!inner.contains(quote) && !inner.contains('\\')).then_some(inner);
        }
    }
    let first = value.chars().next()?;
    // Indicators, numbers and signs, and the words YAML reads as null or booleans.
    if "-?:,[]{}#&*!|>'\"%@`~.+0123456789".contains(first)
        || value.contains(": ")
        || value.contains(" #")
        || value.ends_with(':')
        || matches!(
            value.to_ascii_lowercase().as_str(),
            "null" | "true" | "false" | "yes" | "no" | "on" | "off" | "y" | "n" | ".inf" | ".nan"
        )
    {
        return None;
    }
    Some(value)
}

/// Top-level `key: value` lines, quotes removed.
fn by_lines(yaml: &str) -> Frontmatter {
    let mut front = Frontmatter::default();
    for line in yaml.lines() {
        if line.starts_with([' ', '\t', '#']) {
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        let value = value
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .or_else(|| value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
            .unwrap_or(value)
            .to_owned();
        let slot = match key.trim() {
            "name" => &mut front.name,
            "description" => &mut front.description,
            "argument-hint" => &mut front.argument_hint,
            "compatibility" => &mut front.compatibility,
            _ => continue,
        };
        if !value.is_empty() {
            *slot = Some(value);
        }
    }
    front
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frontmatter_is_split_from_the_body() {
        let s = split("---\nname: a\n---\n# Body\n");
        assert_eq!(s.yaml, Some("name: a\n"));
        assert_eq!(s.body, "# Body\n");
        let s = split("\u{feff}---\r\nname: a\r\n---\r\nbody");
        assert_eq!(s.yaml, Some("name: a\r\n"));
        assert_eq!(s.body, "body");
        assert!(split("# no frontmatter\n").yaml.is_none());
        assert!(split("---\nname: a\nnever closed\n").yaml.is_none());
    }

    #[test]
    fn valid_yaml_is_read_with_its_types_and_folded_strings() {
        let (f, warning) = parse(
            "name: pdf\ndescription: >-\n  Extract text\n  and tables.\nmetadata:\n  version: \"1.0\"\nallowed-tools: Bash(git:*) Read\n",
        );
        assert_eq!(warning, None);
        assert_eq!(f.name.as_deref(), Some("pdf"));
        assert_eq!(f.description.as_deref(), Some("Extract text and tables."));
        let (f, _) = parse("name: 2024\ndescription: [not, text]\n");
        assert_eq!(f.name.as_deref(), Some("2024"));
        assert_eq!(f.description, None);
    }

    #[test]
    fn plain_agrees_with_yaml() {
        let samples = [
            "name: pdf\ndescription: Extract text and tables from PDF files.\n",
            "name: pdf\ndescription: Extract text, fill forms; merge (any) PDFs.\nlicense: Apache-2.0\nmetadata:\n  author: example-org\n  version: \"1.0\"\nallowed-tools: Bash(git:*) Read\n",
            "# comment\nname: 'quoted'\ndescription: \"Use when: asked\"\n\n",
            "name: a\ndescription: b\ncompatibility: Requires git, docker and network access\nargument-hint: [file] [mode]\n",
            "name: a\ndescription: b # a comment\n",
            "name: 2024\ndescription: 1.0\n",
            "name: a\ndescription: true\n",
            "name: a\ndescription: ~\n",
            "name: a\ndescription: null\n",
            "name: a\ndescription:\n  Folded over\n  two lines\n",
            "name: a\ndescription: >-\n  folded\n",
            "name: a\ndescription: first\n  continued\n",
            "name: a\nmetadata:\n  x: 1\n    y: 2\ndescription: d\n",
            "name: a\nmetadata:\n  x: 1\n y: 2\ndescription: d\n",
            "name: a\nmetadata:\ndescription: d\n",
            "name: a\nname: b\ndescription: d\n",
            "name: a\ndescription: \"esc\\\"aped\"\n",
            "name: a\ndescription: 'it''s'\n",
            "name: a\ndescription: d\nallowed-tools:\n  - Read\n",
            "name: a\ndescription: &anchor d\n",
            "name: a\ndescription: \"unclosed\n",
            "name: a\ndescription: d\t\n",
            "name: a\ndescription: ends with colon:\n",
            "name: a\ndescription: Ünïcode wörds — fine\n",
            "name: a\ndescription: d\nmetadata:\n  k: v\n  k: w\n",
            "",
        ];
        let mut answered = 0;
        for yaml in samples {
            let Some(fast) = plain(yaml) else { continue };
            answered += 1;
            let full = serde_saphyr::from_str::<Option<Frontmatter>>(yaml)
                .unwrap_or_else(|e| panic!("{yaml:?} is read plainly but is not YAML: {e}"))
                .unwrap_or_default();
            assert_eq!(fast, full, "{yaml:?}");
        }
        // The common shapes are read without the parser.
        assert!(answered >= 5, "{answered}");
        assert_eq!(
            plain(samples[1]).unwrap().description.as_deref(),
            Some("Extract text, fill forms; merge (any) PDFs.")
        );
    }

    #[test]
    fn invalid_yaml_is_read_line_by_line_with_a_warning() {
        let (f, warning) =
            parse("name: review\ndescription: Use when: the user asks for a review\n  bad: [\n");
        assert!(warning.unwrap().contains("not valid YAML"));
        assert_eq!(f.name.as_deref(), Some("review"));
        assert_eq!(
            f.description.as_deref(),
            Some("Use when: the user asks for a review")
        );
    }

    #[test]
    fn hostile_yaml_costs_little() {
        // Nested aliases that would expand to billions of nodes.
        let mut yaml = String::from("a: &a [x,x,x,x,x,x,x,x,x,x]\n");
        for n in 1..20 {
            let prev = (b'a' + n - 1) as char;
            let this = (b'a' + n) as char;
            yaml.push_str(&format!(
                "{this}: &{this} [*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev}]\n"
            ));
        }
        yaml.push_str("name: bomb\ndescription: d\n");
        let started = std::time::Instant::now();
        let _ = parse(&yaml);
        let deep = "[".repeat(100_000);
        let _ = parse(&deep);
        let keys: String = (0..40_000).map(|n| format!("k{n}: v\n")).collect();
        let _ = parse(&keys);
        // Not a timing assertion on the machine's speed: unbounded expansion takes hours.
        assert!(started.elapsed() < std::time::Duration::from_secs(30));
    }
}
