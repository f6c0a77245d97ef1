//! The one `pattern` form the document uses: an anchored character class with
//! a repeat count, `^[A-Za-z0-9._:~-]{1,128}$`. The class holds single
//! characters and ranges `a-z`, with a `-` of its own only first or last; the
//! count is `{n}` or `{m,n}`. Any other form (alternation, groups, escapes,
//! several atoms, a class without a count) is refused, so the document cannot
//! lean on a regular expression nothing here reads right.

/// A parsed pattern: the characters the class allows and the repeat count.
#[derive(Clone, Debug, PartialEq)]
pub struct Pattern {
    /// Inclusive ranges of the class (a single character is `(c, c)`).
    ranges: Vec<(char, char)>,
    pub min: usize,
    pub max: usize,
}

impl Pattern {
    pub fn parse(pattern: &str) -> Result<Pattern, String> {
        let refuse = |why: &str| {
            Err(format!(
                "pattern {pattern:?} is not of the one supported form ^[class]{{m,n}}$: {why}"
            ))
        };
        let Some(body) = pattern.strip_prefix("^[") else {
            return refuse("it must start with ^[");
        };
        let Some(body) = body.strip_suffix('$') else {
            return refuse("it must end with $");
        };
        let Some(close) = body.find(']') else {
            return refuse("the class is not closed");
        };
        let (class, count) = (&body[..close], &body[close + 1..]);
        let chars: Vec<char> = class.chars().collect();
        if chars.is_empty() || chars[0] == '^' {
            return refuse("the class is empty or negated");
        }
        if chars.iter().any(|c| matches!(c, '\\' | '[' | ']')) {
            return refuse("the class holds an escape or a bracket");
        }
        let mut ranges = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if i + 2 < chars.len() && chars[i + 1] == '-' {
                let end = chars[i + 2];
                if end < c {
                    return refuse("a range runs backwards");
                }
                ranges.push((c, end));
                i += 3;
            } else if c == '-' && i != 0 && i != chars.len() - 1 {
                return refuse("a '-' of its own must be first or last in the class");
            } else {
                ranges.push((c, c));
                i += 1;
            }
        }
        let Some(count) = count.strip_prefix('{').and_then(|c| c.strip_suffix('}')) else {
            return refuse("the class needs a repeat count {m,n}");
        };
        let number = |s: &str| s.parse::<usize>().ok().filter(|_| !s.starts_with('+'));
        let (min, max) = match count.split_once(',') {
            Some((m, n)) => (number(m), number(n)),
            None => (number(count), number(count)),
        };
        match (min, max) {
            (Some(min), Some(max)) if min <= max => Ok(Pattern { ranges, min, max }),
            _ => refuse("the repeat count is not {n} or {m,n} with m <= n"),
        }
    }

    /// Whether `c` is in the class.
    pub fn allows(&self, c: char) -> bool {
        self.ranges.iter().any(|(lo, hi)| (*lo..=*hi).contains(&c))
    }

    /// Whether the whole of `s` matches.
    pub fn matches(&self, s: &str) -> bool {
        let n = s.chars().count();
        (self.min..=self.max).contains(&n) && s.chars().all(|c| self.allows(c))
    }

    /// Every character of the class, in order (for drawing instances).
    pub fn alphabet(&self) -> Vec<char> {
        self.ranges.iter().flat_map(|(lo, hi)| *lo..=*hi).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_pattern_reads_as_written() {
        let p = Pattern::parse("^[A-Za-z0-9._:~-]{1,128}$").expect("supported");
        assert_eq!((p.min, p.max), (1, 128));
        assert_eq!(p.alphabet().len(), 26 + 26 + 10 + 5);
        for good in ["a", "op-42", "A.b_c:d~e-f", &"z".repeat(128)] {
            assert!(p.matches(good), "{good}");
        }
        for bad in ["", "a b", "a/b", "é", &"z".repeat(129), "a\n"] {
            assert!(!p.matches(bad), "{bad:?}");
        }
        let fixed = Pattern::parse("^[-0-9]{3}$").expect("supported");
        assert!(fixed.matches("1-2") && !fixed.matches("12"));
    }

    #[test]
    fn other_forms_are_refused() {
        for other in [
            "[a-z]{1,3}",
            "^[a-z]{1,3}",
            "^[a-z]+$",
            "^[a-z]$",
            "^[^a-z]{1,2}$",
            "^[a\\-z]{1,2}$",
            "^[a-z]{1,2}[0-9]{1}$",
            "^(a|b){1,2}$",
            "^[z-a]{1,2}$",
            "^[a-c-e]{1,2}$",
            "^[a-z]{3,1}$",
            "^[a-z]{,3}$",
            "^[]{1}$",
        ] {
            assert!(Pattern::parse(other).is_err(), "{other}");
        }
    }
}
