//! Reading one Rust source file for the module check: comments and literal
//! contents blanked (byte offsets kept, so lines stay right), then the
//! `crate::`/`super::`/`self::` paths it uses, the `mod` items it declares
//! and the files it includes.
//!
//! A token scan, not a parser: it knows `use` trees (groups, `self`, globs,
//! `as`), qualified paths in code, inline `mod x { … }` blocks (found by
//! brace depth) and `#[path = "…"]`, which is all the check needs.

/// One string literal: where it starts in the file and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Literal {
    /// Byte offset of the literal's first byte (its prefix or quote).
    pub start: usize,
    /// The text between the quotes (simple escapes undone).
    pub value: String,
}

/// A source file with comments and literal contents replaced by spaces.
pub struct Masked {
    /// The code: same length as the source, newlines kept.
    pub code: String,
    /// Every string literal, in order.
    pub literals: Vec<Literal>,
    line_starts: Vec<usize>,
}

impl Masked {
    /// The 1-based line of byte `offset`.
    pub fn line(&self, offset: usize) -> usize {
        self.line_starts.partition_point(|&s| s <= offset)
    }

    /// The first string literal starting at or after `offset` and before `end`.
    fn literal_in(&self, offset: usize, end: usize) -> Option<&Literal> {
        let i = self.literals.partition_point(|l| l.start < offset);
        self.literals.get(i).filter(|l| l.start < end)
    }
}

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}

/// Blanks comments (nested block comments included) and the contents of
/// string, byte-string, raw-string and char literals; lifetimes stay.
pub fn mask(src: &str) -> Masked {
    let b = src.as_bytes();
    let n = b.len();
    let mut out = b.to_vec();
    let mut literals = Vec::new();
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for byte in &mut out[from..to.min(n)] {
            if *byte != b'\n' {
                *byte = b' ';
            }
        }
    };
    let mut i = 0;
    while i < n {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == b'/' && next == Some(b'/') {
            let end = b[i..].iter().position(|&x| x == b'\n').map_or(n, |p| i + p);
            blank(&mut out, i, end);
            i = end;
        } else if c == b'/' && next == Some(b'*') {
            let mut depth = 0usize;
            let mut j = i;
            while j < n {
                if b[j] == b'/' && b.get(j + 1) == Some(&b'*') {
                    depth += 1;
                    j += 2;
                } else if b[j] == b'*' && b.get(j + 1) == Some(&b'/') {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            blank(&mut out, i, j);
            i = j;
        } else if c == b'"' {
            let mut j = i + 1;
            let mut value = String::new();
            while j < n && b[j] != b'"' {
                if b[j] == b'\\' && j + 1 < n {
                    match b[j + 1] {
                        b'n' => value.push('\n'),
                        b't' => value.push('\t'),
                        b'\n' => {}
                        other => value.push(other as char),
                    }
                    j += 2;
                } else {
                    let len = utf8_len(b[j]);
                    value.push_str(&src[j..(j + len).min(n)]);
                    j += len;
                }
            }
            literals.push(Literal { start: i, value });
            blank(&mut out, i + 1, j);
            i = j + 1;
        } else if c == b'r' && raw_string_start(b, i) {
            let hashes = b[i + 1..].iter().take_while(|&&x| x == b'#').count();
            let body = i + 1 + hashes + 1;
            let mut closing = vec![b'"'];
            closing.extend(std::iter::repeat_n(b'#', hashes));
            let end = b[body..]
                .windows(closing.len())
                .position(|w| w == closing.as_slice())
                .map_or(n, |p| body + p);
            literals.push(Literal {
                start: i,
                value: src[body..end].to_string(),
            });
            blank(&mut out, body, end);
            i = (end + closing.len()).min(n);
        } else if c == b'\'' {
            // A char literal ('x', '\n', '\u{1F}', a multi-byte char) or a
            // lifetime / label ('a, 'static), which stays.
            let end = if next == Some(b'\\') {
                b[i + 2..]
                    .iter()
                    .take(12)
                    .position(|&x| x == b'\'')
                    .map(|p| i + 2 + p)
            } else if let Some(first) = next {
                let after = i + 1 + utf8_len(first);
                (b.get(after) == Some(&b'\'')).then_some(after)
            } else {
                None
            };
            match end {
                Some(end) => {
                    blank(&mut out, i + 1, end);
                    i = end + 1;
                }
                None => i += 1,
            }
        } else {
            i += 1;
        }
    }
    let code = String::from_utf8(out).expect("only whole characters are blanked");
    let line_starts = std::iter::once(0)
        .chain(src.match_indices('\n').map(|(p, _)| p + 1))
        .collect();
    Masked {
        code,
        literals,
        line_starts,
    }
}

fn utf8_len(first: u8) -> usize {
    match first {
        0xF0.. => 4,
        0xE0.. => 3,
        0xC0.. => 2,
        _ => 1,
    }
}

/// Whether the `r` at `i` opens a raw string (`r"`, `r#"`, `br"`, `cr#"`),
/// not an identifier or a raw identifier (`r#type`).
fn raw_string_start(b: &[u8], i: usize) -> bool {
    let prefix_ok = match i.checked_sub(1).map(|p| b[p]) {
        None => true,
        Some(b'b' | b'c') => i < 2 || !is_ident_byte(b[i - 2]),
        Some(p) => !is_ident_byte(p),
    };
    if !prefix_ok {
        return false;
    }
    let hashes = b[i + 1..].iter().take_while(|&&x| x == b'#').count();
    b.get(i + 1 + hashes) == Some(&b'"')
}

/// A token of masked code: an identifier (`$crate` included) or one
/// punctuation character (`::` is one token).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Token<'a> {
    text: &'a str,
    at: usize,
}

fn tokens(code: &str) -> Vec<Token<'_>> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if is_ident_byte(c) || (c == b'$' && b.get(i + 1).is_some_and(|&x| is_ident_byte(x)))
        {
            let start = i;
            i += 1;
            while i < b.len() && is_ident_byte(b[i]) {
                i += 1;
            }
            out.push(Token {
                text: &code[start..i],
                at: start,
            });
        } else if c == b':' && b.get(i + 1) == Some(&b':') {
            out.push(Token { text: "::", at: i });
            i += 2;
        } else {
            let len = utf8_len(c);
            out.push(Token {
                text: &code[i..(i + len).min(b.len())],
                at: i,
            });
            i += len;
        }
    }
    out
}

fn is_ident(t: &str) -> bool {
    t.bytes()
        .next()
        .is_some_and(|c| is_ident_byte(c) && !c.is_ascii_digit())
}

/// How a path starts, which says how it resolves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathKind {
    /// From `crate`, `$crate`, `super` or `self`.
    Local,
    /// A local glob import (`use super::*`): its segments name the module
    /// whose names it brings in.
    Glob,
    /// From another name (`norm::same_memory`, `std::fmt`): this crate's
    /// only where a glob import brought that name in as a module.
    Bare,
}

/// A path the file uses, as written (after expanding `use` groups).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsedPath {
    /// Byte offset where it is written.
    pub at: usize,
    /// Its segments: `["super", "norm", "same_memory"]`.
    pub segments: Vec<String>,
    /// How it starts.
    pub kind: PathKind,
}

/// Every path of two or more segments in `code`: each `use` tree expanded
/// (`use crate::{a::{b, c}, d}` gives `crate::a::b`, `crate::a::c`,
/// `crate::d`; `use super::*` a [`PathKind::Glob`]), then the qualified
/// paths in the rest of the code. `pub(in crate::x)` visibilities are not
/// uses; nor is a path's tail (`a::b` of `x::a::b`).
pub fn used_paths(code: &str) -> Vec<UsedPath> {
    let toks = tokens(code);
    let mut out = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        let t = toks[i];
        if t.text == "use" {
            let mut j = i + 1;
            let mut paths = Vec::new();
            use_tree(&toks, &mut j, &[], &mut paths);
            out.extend(paths);
            // Skip to the end of the declaration.
            while j < toks.len() && toks[j].text != ";" {
                j += 1;
            }
            i = j + 1;
            continue;
        }
        let starts_path = (is_ident(t.text) || t.text == "$crate")
            && toks.get(i + 1).is_some_and(|n| n.text == "::")
            && i.checked_sub(1).is_none_or(|p| toks[p].text != "::")
            && !(i >= 2 && toks[i - 1].text == "in" && toks[i - 2].text == "(");
        if starts_path {
            let mut segments = vec![t.text.to_string()];
            let mut j = i + 1;
            while j + 1 < toks.len() && toks[j].text == "::" && is_ident(toks[j + 1].text) {
                segments.push(toks[j + 1].text.to_string());
                j += 2;
            }
            if segments.len() > 1 {
                let kind = if is_local(&segments) {
                    PathKind::Local
                } else {
                    PathKind::Bare
                };
                out.push(UsedPath {
                    at: t.at,
                    segments,
                    kind,
                });
            }
            i = j;
            continue;
        }
        i += 1;
    }
    out
}

fn is_local(segments: &[String]) -> bool {
    segments
        .first()
        .is_some_and(|s| matches!(s.as_str(), "crate" | "$crate" | "super" | "self"))
}

/// Parses one use tree at `toks[*j]` under `prefix`, pushing its leaves.
fn use_tree(toks: &[Token<'_>], j: &mut usize, prefix: &[String], out: &mut Vec<UsedPath>) {
    let mut path = prefix.to_vec();
    let mut glob = false;
    let mut at = toks.get(*j).map_or(0, |t| t.at);
    if toks.get(*j).is_some_and(|t| t.text == "::") {
        // `use ::extern_crate::…`: never this crate.
        path.push("::".to_string());
        *j += 1;
    }
    loop {
        let Some(t) = toks.get(*j) else { return };
        if t.text == "{" {
            *j += 1;
            while toks.get(*j).is_some_and(|t| t.text != "}") {
                use_tree(toks, j, &path, out);
                if toks.get(*j).is_some_and(|t| t.text == ",") {
                    *j += 1;
                }
            }
            *j += 1;
            return;
        }
        if t.text == "*" {
            *j += 1;
            glob = true;
            break;
        }
        if !is_ident(t.text) && t.text != "$crate" {
            return;
        }
        if path.len() == prefix.len() {
            at = t.at;
        }
        // `self` inside a group names the group's own prefix.
        if !(t.text == "self" && !prefix.is_empty() && path.len() == prefix.len()) {
            path.push(t.text.to_string());
        }
        *j += 1;
        if toks.get(*j).is_some_and(|t| t.text == "::") {
            *j += 1;
        } else {
            break;
        }
    }
    if toks.get(*j).is_some_and(|t| t.text == "as") {
        *j += 2;
    }
    if !path.is_empty() && path[0] != "::" {
        let kind = match (is_local(&path), glob) {
            (true, true) => PathKind::Glob,
            (true, false) => PathKind::Local,
            (false, _) => PathKind::Bare,
        };
        out.push(UsedPath {
            at,
            segments: path,
            kind,
        });
    }
}

/// A `mod` item: `mod name;` (a file) or `mod name { … }` (inline).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModItem {
    /// The module's name.
    pub name: String,
    /// Byte offset of the `mod` keyword.
    pub at: usize,
    /// For an inline module, the byte range of its braces' contents.
    pub body: Option<(usize, usize)>,
    /// The `#[path = "…"]` on a file module, if any.
    pub path_attr: Option<String>,
    /// The names of the inline modules it sits in, outermost first.
    pub within: Vec<String>,
}

/// Every `mod` item of the file, inline ones with their extent.
pub fn mod_items(masked: &Masked) -> Vec<ModItem> {
    let toks = tokens(&masked.code);
    let mut out: Vec<ModItem> = Vec::new();
    // Open braces: Some(index into out) for an inline module's brace.
    let mut open: Vec<Option<usize>> = Vec::new();
    let mut item_start = 0;
    for (i, t) in toks.iter().enumerate() {
        match t.text {
            "{" => {
                let is_mod = i >= 2 && toks[i - 2].text == "mod" && is_ident(toks[i - 1].text);
                let index = is_mod.then(|| {
                    out.push(ModItem {
                        name: toks[i - 1].text.to_string(),
                        at: toks[i - 2].at,
                        body: Some((t.at + 1, masked.code.len())),
                        path_attr: None,
                        within: within(&out, &open),
                    });
                    out.len() - 1
                });
                open.push(index);
                item_start = t.at + 1;
            }
            "}" => {
                if let Some(Some(index)) = open.pop()
                    && let Some(body) = &mut out[index].body
                {
                    body.1 = t.at;
                }
                item_start = t.at + 1;
            }
            ";" => {
                if i >= 2 && toks[i - 2].text == "mod" && is_ident(toks[i - 1].text) {
                    let at = toks[i - 2].at;
                    let attrs = &masked.code[item_start..at];
                    let path_attr = attrs.find("#[path").and_then(|p| {
                        masked
                            .literal_in(item_start + p, at)
                            .map(|l| l.value.clone())
                    });
                    out.push(ModItem {
                        name: toks[i - 1].text.to_string(),
                        at,
                        body: None,
                        path_attr,
                        within: within(&out, &open),
                    });
                }
                item_start = t.at + 1;
            }
            _ => {}
        }
    }
    out
}

fn within(items: &[ModItem], open: &[Option<usize>]) -> Vec<String> {
    open.iter()
        .flatten()
        .map(|&i| items[i].name.clone())
        .collect()
}

/// A file included with `include!`, `include_str!` or `include_bytes!`:
/// the path as
/// written and whether it is relative to the crate's directory
/// (`concat!(env!("CARGO_MANIFEST_DIR"), "…")`) rather than the file's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Include {
    /// Byte offset of the macro name.
    pub at: usize,
    /// The macro: `include`, `include_str` or `include_bytes`.
    pub mac: String,
    /// The path, literal parts joined.
    pub path: String,
    /// Relative to `CARGO_MANIFEST_DIR` instead of the including file.
    pub from_manifest_dir: bool,
}

/// Every `include!`/`include_str!`/`include_bytes!` whose path is made of literals
/// (and `CARGO_MANIFEST_DIR`); ones built on `OUT_DIR` are generated
/// files and left out.
pub fn includes(masked: &Masked) -> Vec<Include> {
    let toks = tokens(&masked.code);
    let mut out = Vec::new();
    for (i, t) in toks.iter().enumerate() {
        if !matches!(t.text, "include_str" | "include_bytes" | "include")
            || toks.get(i + 1).is_none_or(|n| n.text != "!")
        {
            continue;
        }
        // The macro's arguments: up to the matching close.
        let mut depth = 0i32;
        let mut end = masked.code.len();
        for u in &toks[i + 2..] {
            match u.text {
                "(" | "[" | "{" => depth += 1,
                ")" | "]" | "}" => {
                    depth -= 1;
                    if depth == 0 {
                        end = u.at;
                        break;
                    }
                }
                _ => {}
            }
        }
        let from = masked.literals.partition_point(|l| l.start < t.at);
        let parts: Vec<&str> = masked.literals[from..]
            .iter()
            .take_while(|l| l.start < end)
            .map(|l| l.value.as_str())
            .collect();
        if parts.contains(&"OUT_DIR") {
            continue;
        }
        let from_manifest_dir = parts.contains(&"CARGO_MANIFEST_DIR");
        let path: String = parts
            .iter()
            .filter(|p| **p != "CARGO_MANIFEST_DIR")
            .copied()
            .collect();
        out.push(Include {
            at: t.at,
            mac: t.text.to_string(),
            path,
            from_manifest_dir,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The local (and glob) paths of `src`, joined.
    fn paths(src: &str) -> Vec<String> {
        used_paths(&mask(src).code)
            .into_iter()
            .filter(|p| p.kind != PathKind::Bare)
            .map(|p| p.segments.join("::"))
            .collect()
    }

    #[test]
    fn use_groups_expand_to_every_leaf() {
        assert_eq!(
            paths("use crate::{a::{b, c as d}, e, f::*};"),
            ["crate::a::b", "crate::a::c", "crate::e", "crate::f"]
        );
    }

    #[test]
    fn self_in_a_group_names_the_prefix() {
        assert_eq!(
            paths("pub use super::norm::{self, Thing};"),
            ["super::norm", "super::norm::Thing"]
        );
    }

    #[test]
    fn chained_super_paths_are_kept_whole() {
        assert_eq!(
            paths("fn f() { super::super::exec::run(x); self::g(); }"),
            ["super::super::exec::run", "self::g"]
        );
    }

    #[test]
    fn globs_and_bare_paths_are_told_apart() {
        let found: Vec<_> =
            used_paths(&mask("use super::*; use std::fmt; fn f() { norm::g(); x::y::z(); }").code)
                .into_iter()
                .map(|p| (p.segments.join("::"), p.kind))
                .collect();
        assert_eq!(
            found,
            [
                ("super".to_string(), PathKind::Glob),
                ("std::fmt".to_string(), PathKind::Bare),
                ("norm::g".to_string(), PathKind::Bare),
                ("x::y::z".to_string(), PathKind::Bare),
            ]
        );
    }

    #[test]
    fn extern_and_bare_paths_are_not_local() {
        assert_eq!(
            paths("use std::fmt; use ::core::mem; use norm::x; fn f() { other::crate_x(); }"),
            Vec::<String>::new()
        );
    }

    #[test]
    fn visibility_paths_are_not_uses() {
        assert_eq!(
            paths("pub(in crate::ops) fn f() {} pub(crate) fn g() { for x in crate::h::i() {} }"),
            ["crate::h::i"]
        );
    }

    #[test]
    fn comments_and_strings_hide_paths() {
        assert_eq!(
            paths(
                "// crate::a::b\n/* crate::c /* nested */ crate::d */ let s = \"crate::e\"; let r = r#\"crate::f\"#; let c = '\"'; crate::g::h"
            ),
            ["crate::g::h"]
        );
    }

    #[test]
    fn lifetimes_do_not_open_char_literals() {
        assert_eq!(
            paths("fn f<'a>(x: &'a str) -> &'a str { crate::a::b(x) }"),
            ["crate::a::b"]
        );
    }

    #[test]
    fn lines_count_from_one() {
        let m = mask("a\nb\ncrate::x");
        assert_eq!(m.line(0), 1);
        assert_eq!(m.line(4), 3);
    }

    #[test]
    fn inline_modules_have_their_extent_and_nesting() {
        let src = "mod a;\nmod outer { fn f() {} mod inner { } }\n#[cfg(test)]\n#[path = \"t.rs\"]\nmod tests;";
        let items = mod_items(&mask(src));
        let names: Vec<_> = items
            .iter()
            .map(|m| (m.name.as_str(), m.within.clone()))
            .collect();
        assert_eq!(
            names,
            [
                ("a", vec![]),
                ("outer", vec![]),
                ("inner", vec!["outer".to_string()]),
                ("tests", vec![])
            ]
        );
        let (start, end) = items[1].body.expect("inline");
        assert_eq!(&src[start..end], " fn f() {} mod inner { } ");
        assert_eq!(items[3].path_attr.as_deref(), Some("t.rs"));
        assert_eq!(items[0].path_attr, None);
    }

    #[test]
    fn includes_join_literal_parts_and_skip_generated_files() {
        let src = r#"const A: &str = include_str!("../../x/a.cpp");
const B: &[u8] = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/data/b.bin"));
const C: &str = include_str!(concat!(env!("OUT_DIR"), "/gen.rs"));
include!("../../common/shared.rs");"#;
        let found = includes(&mask(src));
        assert_eq!(found.len(), 3);
        assert_eq!(
            (found[0].path.as_str(), found[0].from_manifest_dir),
            ("../../x/a.cpp", false)
        );
        assert_eq!(
            (found[1].path.as_str(), found[1].from_manifest_dir),
            ("/data/b.bin", true)
        );
        assert_eq!(found[1].mac, "include_bytes");
        assert_eq!(
            (found[2].mac.as_str(), found[2].path.as_str()),
            ("include", "../../common/shared.rs")
        );
    }
}
