//! GPT-2's reversible byte <-> character mapping used by byte-level BPE
//! vocabularies: every byte gets a printable character so that token texts
//! never hold raw control bytes or spaces.
//!
//! Printable Latin-1 bytes (`!`..=`~`, `¡`..=`¬`, `®`..=`ÿ`) stand for
//! themselves; the remaining 68 bytes take the characters U+0100, U+0101, ...
//! in byte order (so the space 0x20 becomes `Ġ` U+0120).

/// The highest character the mapping produces, plus one.
const MAPPED_LIMIT: usize = 256 + 68;

/// Both directions of the byte-level mapping, built once per tokenizer.
#[derive(Debug, Clone)]
pub(crate) struct ByteLevel {
    byte_to_char: [char; 256],
    /// Indexed by the character's code point; `None` for characters the
    /// mapping never produces.
    char_to_byte: Vec<Option<u8>>,
}

fn stands_for_itself(byte: u8) -> bool {
    matches!(byte, 0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF)
}

impl ByteLevel {
    pub(crate) fn new() -> ByteLevel {
        let mut byte_to_char = ['\0'; 256];
        let mut char_to_byte = vec![None; MAPPED_LIMIT];
        let mut next_extra = 256u32;
        for byte in 0..=255u8 {
            let code = if stands_for_itself(byte) {
                u32::from(byte)
            } else {
                let code = next_extra;
                next_extra += 1;
                code
            };
            // Every code below MAPPED_LIMIT is a valid scalar value (no surrogates).
            let ch = char::from_u32(code).unwrap_or('\u{FFFD}');
            byte_to_char[usize::from(byte)] = ch;
            char_to_byte[code as usize] = Some(byte);
        }
        ByteLevel {
            byte_to_char,
            char_to_byte,
        }
    }

    /// The text's UTF-8 bytes, each replaced by its mapped character.
    pub(crate) fn encode(&self, text: &str, out: &mut String) {
        out.clear();
        out.extend(text.bytes().map(|b| self.byte_to_char[usize::from(b)]));
    }

    /// The byte a mapped character stands for, if it is one.
    pub(crate) fn byte_of(&self, ch: char) -> Option<u8> {
        self.char_to_byte.get(ch as usize).copied().flatten()
    }

    /// Undoes the mapping on a token's text as llama.cpp's `llama_decode_text`
    /// does: a character outside the mapping is written out as
    /// `[UNK_BYTE_0x<its UTF-8 in hex><the whole token text>]`.
    pub(crate) fn decode_token_text(&self, text: &str) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(text.len());
        for ch in text.chars() {
            match self.byte_of(ch) {
                Some(byte) => bytes.push(byte),
                None => {
                    bytes.extend_from_slice(b"[UNK_BYTE_0x");
                    let mut utf8 = [0u8; 4];
                    for b in ch.encode_utf8(&mut utf8).bytes() {
                        bytes.extend_from_slice(format!("{b:02x}").as_bytes());
                    }
                    bytes.extend_from_slice(text.as_bytes());
                    bytes.push(b']');
                }
            }
        }
        bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn space_newline_and_printable_bytes_map_like_gpt2() {
        let map = ByteLevel::new();
        let mut out = String::new();
        map.encode(" \n!a\u{e9}", &mut out);
        // ' ' -> U+0120, '\n' -> U+010A, '!' and 'a' unchanged, 'é' = C3 A9 -> 'Ã' '©'.
        assert_eq!(out, "\u{120}\u{10a}!a\u{c3}\u{a9}");
    }

    #[test]
    fn every_byte_round_trips_through_its_character() {
        let map = ByteLevel::new();
        let mut seen = std::collections::HashSet::new();
        for byte in 0..=255u8 {
            let ch = map.byte_to_char[usize::from(byte)];
            assert!(seen.insert(ch), "character {ch:?} used twice");
            assert_eq!(map.byte_of(ch), Some(byte));
        }
        assert_eq!(map.byte_of('\u{144}'), None);
    }

    #[test]
    fn unmapped_character_decodes_to_the_unk_byte_marker() {
        let map = ByteLevel::new();
        assert_eq!(map.decode_token_text("\u{120}hi"), b" hi");
        assert_eq!(
            map.decode_token_text("x\u{3b1}"),
            b"x[UNK_BYTE_0xceb1x\xce\xb1]".to_vec()
        );
    }
}
