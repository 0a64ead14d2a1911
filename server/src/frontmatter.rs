//! Markdown with YAML front matter (`---` fences at the top), as skills and memory blocks
//! are written.

use serde::Serialize;
use serde::de::DeserializeOwned;

/// The front matter parsed as `T` and the body after it. A file without front matter gives
/// `T`'s default and the whole text; front matter that does not parse is an error that says
/// why.
pub fn parse<T: DeserializeOwned + Default>(text: &str) -> Result<(T, &str), String> {
    let rest = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(after) = rest
        .strip_prefix("---\n")
        .or_else(|| rest.strip_prefix("---\r\n"))
    else {
        return Ok((T::default(), text));
    };
    let (yaml, body) = match after.find("\n---") {
        Some(end) => {
            let body = &after[end + 4..];
            let body = body.strip_prefix('\r').unwrap_or(body);
            (&after[..end + 1], body.strip_prefix('\n').unwrap_or(body))
        }
        None => return Err("the front matter has no closing `---`".into()),
    };
    let meta = if yaml.trim().is_empty() {
        T::default()
    } else {
        serde_yaml_ng::from_str(yaml).map_err(|e| format!("bad front matter: {e}"))?
    };
    Ok((meta, body))
}

/// `meta` as front matter, then `body`.
pub fn render<T: Serialize>(meta: &T, body: &str) -> String {
    let yaml = serde_yaml_ng::to_string(meta).unwrap_or_default();
    format!("---\n{yaml}---\n{body}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Default, Deserialize, Serialize, PartialEq)]
    struct Meta {
        #[serde(default)]
        name: String,
        #[serde(default)]
        limit: Option<usize>,
    }

    #[test]
    fn parses_and_renders() {
        let (m, body) = parse::<Meta>("---\nname: \"x: y\"\nlimit: 3\n---\nbody\n").unwrap();
        assert_eq!(
            m,
            Meta {
                name: "x: y".into(),
                limit: Some(3)
            }
        );
        assert_eq!(body, "body\n");
        let text = render(&m, "body\n");
        assert_eq!(parse::<Meta>(&text).unwrap(), (m, "body\n"));
        assert_eq!(
            parse::<Meta>("no front matter").unwrap().1,
            "no front matter"
        );
        assert!(
            parse::<Meta>("---\nname: [\n---\n")
                .unwrap_err()
                .contains("bad front matter")
        );
        assert!(parse::<Meta>("---\nname: x\n").is_err());
    }
}
