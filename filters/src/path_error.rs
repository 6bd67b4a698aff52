//! An error in a file a person wrote, named by where it is:
//! `workload.duration: must be greater than 0`. The load-testing half's
//! files (fitted models, scenarios) report through these; a file has every
//! problem listed at once, one a line.

use std::fmt;

/// One problem, at `path` (`""` or `"."`: the file as a whole).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathError {
    pub path: String,
    pub message: String,
}

impl fmt::Display for PathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.path.as_str() {
            "" | "." => f.write_str(&self.message),
            path => write!(f, "{path}: {}", self.message),
        }
    }
}

/// Every problem of one file, in the order found.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct PathErrors(pub Vec<PathError>);

impl fmt::Display for PathErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lines: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        f.write_str(&lines.join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_problem_is_a_line_named_by_its_path() {
        let errors = PathErrors(vec![
            PathError {
                path: "steps[1].depends_on".into(),
                message: "unknown step `nope`".into(),
            },
            PathError {
                path: String::new(),
                message: "empty file".into(),
            },
        ]);
        assert_eq!(
            errors.to_string(),
            "steps[1].depends_on: unknown step `nope`\nempty file"
        );
    }
}
