//! A small C-like preprocessor for WGSL: `#include "name"`, `#define NAME
//! [value]`, `#undef`, `#ifdef`, `#ifndef`, `#if defined(A) || ...`,
//! `#elif`, `#else`, `#endif`. Defined names are replaced as whole
//! identifiers in the lines that follow. Errors name the file and line.

use std::collections::BTreeMap;
use std::fmt;

/// A preprocessing failure, naming the file and line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreprocessError {
    /// Shader file the error is in.
    pub file: String,
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for PreprocessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.wgsl:{}: {}", self.file, self.line, self.message)
    }
}

impl std::error::Error for PreprocessError {}

/// One level of `#if` nesting.
struct Cond {
    /// Lines of this branch are emitted.
    active: bool,
    /// Some earlier branch of this `#if` chain was taken.
    taken: bool,
    /// The enclosing level emits.
    parent_active: bool,
}

/// Preprocessor state: the defines, and how to find included files.
pub struct Preprocessor<'a> {
    defines: BTreeMap<String, String>,
    lookup: &'a dyn Fn(&str) -> Option<&'a str>,
    depth: usize,
}

const MAX_INCLUDE_DEPTH: usize = 16;

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

impl<'a> Preprocessor<'a> {
    /// A preprocessor that resolves `#include "name"` through `lookup`.
    pub fn new(lookup: &'a dyn Fn(&str) -> Option<&'a str>) -> Preprocessor<'a> {
        Preprocessor {
            defines: BTreeMap::new(),
            lookup,
            depth: 0,
        }
    }

    /// Defines `name` as `value` ("" for a flag).
    pub fn define(&mut self, name: &str, value: &str) {
        self.defines.insert(name.to_string(), value.to_string());
    }

    /// Whether `name` is defined.
    pub fn is_defined(&self, name: &str) -> bool {
        self.defines.contains_key(name)
    }

    /// Preprocesses the file called `name` and returns WGSL.
    pub fn run(&mut self, name: &str) -> Result<String, PreprocessError> {
        let text = (self.lookup)(name).ok_or_else(|| PreprocessError {
            file: name.to_string(),
            line: 0,
            message: format!("no shader file '{name}.wgsl'"),
        })?;
        let mut out = String::with_capacity(text.len() + 256);
        self.process(name, text, &mut out)?;
        Ok(out)
    }

    fn process(&mut self, file: &str, text: &str, out: &mut String) -> Result<(), PreprocessError> {
        let mut stack: Vec<Cond> = Vec::new();
        let err = |line: usize, message: String| PreprocessError {
            file: file.to_string(),
            line,
            message,
        };
        for (i, raw) in text.lines().enumerate() {
            let lineno = i + 1;
            let active = stack.last().is_none_or(|c| c.active);
            let trimmed = raw.trim_start();
            let Some(directive) = trimmed.strip_prefix('#') else {
                if active {
                    out.push_str(&self.substitute(raw));
                    out.push('\n');
                }
                continue;
            };
            let directive = directive.split("//").next().unwrap_or("").trim();
            let (word, rest) = directive
                .split_once(char::is_whitespace)
                .map_or((directive, ""), |(w, r)| (w, r.trim()));
            match word {
                "ifdef" | "ifndef" | "if" => {
                    let value = match word {
                        "ifdef" => self.is_defined(rest),
                        "ifndef" => !self.is_defined(rest),
                        _ => self.eval(rest).map_err(|m| err(lineno, m))?,
                    };
                    stack.push(Cond {
                        active: active && value,
                        taken: value,
                        parent_active: active,
                    });
                }
                "elif" => {
                    let value = self.eval(rest).map_err(|m| err(lineno, m))?;
                    let c = stack
                        .last_mut()
                        .ok_or_else(|| err(lineno, "#elif without #if".into()))?;
                    c.active = c.parent_active && !c.taken && value;
                    c.taken |= value;
                }
                "else" => {
                    let c = stack
                        .last_mut()
                        .ok_or_else(|| err(lineno, "#else without #if".into()))?;
                    c.active = c.parent_active && !c.taken;
                    c.taken = true;
                }
                "endif" => {
                    stack
                        .pop()
                        .ok_or_else(|| err(lineno, "#endif without #if".into()))?;
                }
                _ if !active => {}
                "define" => {
                    let (name, value) = rest
                        .split_once(char::is_whitespace)
                        .map_or((rest, ""), |(n, v)| (n, v.trim()));
                    if name.is_empty() || !name.chars().all(is_ident_char) {
                        return Err(err(lineno, format!("bad #define name '{name}'")));
                    }
                    let value = self.substitute(value);
                    self.define(name, &value);
                }
                "undef" => {
                    self.defines.remove(rest);
                }
                "include" => {
                    let inc = rest.trim_matches('"');
                    if self.depth >= MAX_INCLUDE_DEPTH {
                        return Err(err(
                            lineno,
                            format!("#include nesting deeper than {MAX_INCLUDE_DEPTH}"),
                        ));
                    }
                    let text = (self.lookup)(inc).ok_or_else(|| {
                        err(lineno, format!("#include of unknown file '{inc}.wgsl'"))
                    })?;
                    self.depth += 1;
                    let r = self.process(inc, text, out);
                    self.depth -= 1;
                    r?;
                }
                "error" => return Err(err(lineno, format!("#error {rest}"))),
                other => return Err(err(lineno, format!("unknown directive #{other}"))),
            }
        }
        if !stack.is_empty() {
            return Err(err(text.lines().count(), "missing #endif".into()));
        }
        Ok(())
    }

    /// Evaluates `defined(A) || !defined(B) && C` (C: defined and not "0").
    fn eval(&self, expr: &str) -> Result<bool, String> {
        let expr = expr.trim();
        if expr.is_empty() {
            return Err("empty #if condition".into());
        }
        // `||` binds weaker than `&&`; no parentheses besides defined(...).
        Ok(expr
            .split("||")
            .map(|alt| {
                alt.split("&&")
                    .map(|term| self.term(term.trim()))
                    .collect::<Result<Vec<_>, _>>()
                    .map(|v| v.into_iter().all(|b| b))
            })
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .any(|b| b))
    }

    fn term(&self, term: &str) -> Result<bool, String> {
        if let Some(t) = term.strip_prefix('!') {
            return self.term(t.trim()).map(|b| !b);
        }
        if let Some(inner) = term.strip_prefix("defined").map(str::trim) {
            let name = inner
                .strip_prefix('(')
                .and_then(|s| s.strip_suffix(')'))
                .ok_or_else(|| format!("bad condition term '{term}'"))?;
            return Ok(self.is_defined(name.trim()));
        }
        if term.chars().all(is_ident_char) && !term.is_empty() {
            return Ok(self.defines.get(term).is_some_and(|v| v != "0"));
        }
        Err(format!("bad condition term '{term}'"))
    }

    /// Replaces defined identifiers in `line` (not inside `//` comments).
    fn substitute(&self, line: &str) -> String {
        if self.defines.is_empty() {
            return line.to_string();
        }
        let (code, comment) = match line.find("//") {
            Some(i) => line.split_at(i),
            None => (line, ""),
        };
        let mut out = String::with_capacity(line.len());
        let mut ident = String::new();
        let flush = |ident: &mut String, out: &mut String| {
            if !ident.is_empty() {
                match self.defines.get(ident.as_str()) {
                    Some(v) if !ident.starts_with(|c: char| c.is_ascii_digit()) => out.push_str(v),
                    _ => out.push_str(ident),
                }
                ident.clear();
            }
        };
        for c in code.chars() {
            if is_ident_char(c) {
                ident.push(c);
            } else {
                flush(&mut ident, &mut out);
                out.push(c);
            }
        }
        flush(&mut ident, &mut out);
        out.push_str(comment);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(name: &str) -> Option<&'static str> {
        match name {
            "main" => Some(
                "#include \"inc\"\n#ifdef A\na A B\n#elif defined(B) && !defined(C)\nb B\n#else\nc\n#endif\nx // A stays in comments\n",
            ),
            "inc" => Some("#define B 7\n"),
            "bad" => Some("#ifdef A\n"),
            _ => None,
        }
    }

    #[test]
    fn branches_defines_and_includes() {
        let lookup = |n: &str| files(n);
        let mut p = Preprocessor::new(&lookup);
        p.define("A", "f16");
        assert_eq!(
            p.run("main").unwrap(),
            "a f16 7\nx // A stays in comments\n"
        );
        let mut p = Preprocessor::new(&lookup);
        assert_eq!(p.run("main").unwrap(), "b 7\nx // A stays in comments\n");
        let mut p = Preprocessor::new(&lookup);
        p.define("C", "");
        assert_eq!(p.run("main").unwrap(), "c\nx // A stays in comments\n");
    }

    #[test]
    fn unbalanced_condition_names_file_and_line() {
        let lookup = |n: &str| files(n);
        let e = Preprocessor::new(&lookup).run("bad").unwrap_err();
        assert_eq!(e.to_string(), "bad.wgsl:1: missing #endif");
        let e = Preprocessor::new(&lookup).run("nope").unwrap_err();
        assert!(e.message.contains("no shader file 'nope.wgsl'"), "{e}");
    }

    #[test]
    fn identifiers_are_replaced_whole() {
        let lookup = |_: &str| Some("AB A_1 A 1A\n");
        let mut p = Preprocessor::new(&lookup);
        p.define("A", "z");
        assert_eq!(p.run("x").unwrap(), "AB A_1 z 1A\n");
    }
}
