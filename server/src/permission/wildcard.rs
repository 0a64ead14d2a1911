//! Permission patterns: `*` matches any run of characters (slashes and spaces included),
//! `?` one character, everything else itself. Deliberately simpler than shell globs so that
//! command text with brackets or braces (`echo {a,b}`) is matched literally.

/// Whether `pattern` matches all of `text`.
pub fn matches(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    // Iterative matcher with backtracking to the last `*` (linear in practice).
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || (p[pi] != '*' && p[pi] == t[ti])) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// (number of wildcards, number of literal characters): fewer wildcards, then more literal
/// text, is more specific.
pub fn specificity(pattern: &str) -> (usize, usize) {
    let wild = pattern.chars().filter(|c| *c == '*' || *c == '?').count();
    (wild, pattern.chars().count() - wild)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matching() {
        assert!(matches("*", ""));
        assert!(matches("*", "anything/at all"));
        assert!(matches("git status*", "git status"));
        assert!(matches("git status*", "git status --short"));
        assert!(!matches("git status*", "git stash"));
        assert!(matches("*.env", "config/.env"));
        assert!(!matches("*.env", "config/.env.local"));
        assert!(matches("*.env.*", "config/.env.local"));
        assert!(matches("a?c", "abc"));
        assert!(!matches("a?c", "ac"));
        assert!(matches("echo {a,b}", "echo {a,b}"));
        assert!(matches("*a*b*c", "xxaxxbxxc"));
        assert!(!matches("*a*b*c", "xxaxxcxxb"));
        assert!(matches("日本*", "日本語"));
    }

    #[test]
    fn specificity_counts() {
        assert_eq!(specificity("*"), (1, 0));
        assert_eq!(specificity("git status *"), (1, 11));
        assert_eq!(specificity("rm -rf /tmp/x"), (0, 13));
    }
}
