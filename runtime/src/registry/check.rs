//! The rules every value a plugin hands the host must pass, in one place.
//!
//! [`handle`](super::handle) applies them once, when a value comes in; the
//! rest of the host trusts what the handles return. Each failure is a
//! sentence naming the field, the value and the rule.

use backplane_abi::plugin::PluginError;

/// Longest device, buffer type or stream name kept, in characters.
pub const MAX_NAME_CHARS: usize = 64;
/// Longest device description kept, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 256;
/// Longest plugin message (error, verdict reason, no-device reason) kept.
pub const MAX_MESSAGE_CHARS: usize = 1000;
/// Largest tensor alignment a buffer type may ask for (64 KiB).
pub const MAX_ALIGNMENT: u64 = 64 * 1024;
/// Largest score a plugin may report; scores rank variants, they are not
/// measurements, and a huge one only serves to outrank everything.
pub const MAX_SCORE: u32 = 1_000_000;
/// Padding a buffer type may add to a tensor's size beyond doubling it.
pub const MAX_ALLOC_PADDING: u64 = 64 * 1024;
/// Most extra buffer types kept per device (the rest are ignored).
pub const MAX_EXTRA_BUFFER_TYPES: usize = 8;

/// `text` made safe to print on one line: control characters (ESC, NUL,
/// newlines, ...) become `\u{..}` escapes, and text over `max_chars`
/// characters is cut with a note of its full length.
pub fn clean_text(text: &str, max_chars: usize) -> String {
    let total = text.chars().count();
    let mut out = String::with_capacity(text.len().min(max_chars * 4));
    for c in text.chars().take(max_chars) {
        if c.is_control() {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    if total > max_chars {
        out.push_str(&format!("... ({total} characters, cut at {max_chars})"));
    }
    out
}

/// A plugin error with its message cleaned ([`clean_text`]).
pub fn clean_error(e: PluginError) -> PluginError {
    PluginError::new(e.kind, clean_text(&e.message, MAX_MESSAGE_CHARS))
}

/// Checks a tensor alignment: a power of two from 1 to [`MAX_ALIGNMENT`].
pub fn alignment(value: u64) -> Result<u64, String> {
    if value.is_power_of_two() && value <= MAX_ALIGNMENT {
        Ok(value)
    } else {
        Err(format!(
            "alignment {value}: must be a power of two from 1 to {MAX_ALIGNMENT}"
        ))
    }
}

/// Checks `alloc_size` for a tensor of `nbytes`: at least `nbytes`, at most
/// twice it plus [`MAX_ALLOC_PADDING`] (no overflow either way).
pub fn alloc_size(value: u64, nbytes: u64) -> Result<u64, String> {
    let most = nbytes.saturating_mul(2).saturating_add(MAX_ALLOC_PADDING);
    if value >= nbytes && value <= most {
        Ok(value)
    } else {
        Err(format!(
            "alloc_size {value} for a tensor of {nbytes} bytes: must be from {nbytes} to {most} \
             (the tensor's size, at most doubled plus {MAX_ALLOC_PADDING} bytes of padding)"
        ))
    }
}

/// Checks device memory: free at most total.
pub fn memory(free: u64, total: u64) -> Result<(), String> {
    if free <= total {
        Ok(())
    } else {
        Err(format!(
            "memory: {free} bytes free > {total} bytes total (free must not exceed total)"
        ))
    }
}

/// Checks a variant score: at most [`MAX_SCORE`].
pub fn score(value: u32) -> Result<u32, String> {
    if value <= MAX_SCORE {
        Ok(value)
    } else {
        Err(format!("score {value}: must be at most {MAX_SCORE}"))
    }
}

/// Checks a new buffer: a nonzero id, at least the bytes asked for, and a
/// nonzero base address with room for its size when it is host memory.
pub fn new_buffer(
    id: u64,
    size: u64,
    asked: u64,
    base: usize,
    is_host: bool,
) -> Result<(), String> {
    if id == 0 {
        return Err("buffer id 0: ids must be nonzero (0 means no buffer)".to_string());
    }
    if size < asked {
        return Err(format!(
            "buffer of {size} bytes for {asked} asked: must be at least the size asked"
        ));
    }
    if is_host {
        if base == 0 {
            return Err(
                "host buffer with base address 0: a host buffer type must give its address"
                    .to_string(),
            );
        }
        if (base as u64).checked_add(size).is_none() {
            return Err(format!(
                "host buffer at {base:#x} of {size} bytes: ends past the address space"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_text_escapes_control_characters_and_caps_length() {
        assert_eq!(clean_text("a\u{1b}[31mb\0", 100), "a\\u{1b}[31mb\\u{0}");
        let long = "x".repeat(100_000);
        let c = clean_text(&long, 10);
        assert!(c.starts_with("xxxxxxxxxx... (100000 characters"), "{c}");
        assert!(c.len() < 60);
    }

    #[test]
    fn alignment_must_be_a_small_power_of_two() {
        assert_eq!(alignment(256), Ok(256));
        assert_eq!(alignment(1), Ok(1));
        assert!(alignment(0).unwrap_err().contains("power of two"));
        assert!(
            alignment(1 << 63)
                .unwrap_err()
                .contains("9223372036854775808")
        );
        assert!(alignment(48).is_err());
    }

    #[test]
    fn alloc_size_is_bounded_on_both_sides() {
        assert_eq!(alloc_size(100, 100), Ok(100));
        assert!(alloc_size(99, 100).unwrap_err().contains("alloc_size 99"));
        assert!(alloc_size(u64::MAX, 100).is_err());
        assert_eq!(alloc_size(u64::MAX, u64::MAX), Ok(u64::MAX));
    }

    #[test]
    fn new_buffer_rules_name_the_value() {
        assert!(new_buffer(0, 8, 8, 0, false).unwrap_err().contains("id 0"));
        assert!(
            new_buffer(1, 4, 8, 0, false)
                .unwrap_err()
                .contains("4 bytes for 8")
        );
        assert!(
            new_buffer(1, 8, 8, 0, true)
                .unwrap_err()
                .contains("base address 0")
        );
        assert!(new_buffer(1, 8, 8, 0x1000, true).is_ok());
        assert!(memory(2, 1).unwrap_err().contains("2 bytes free > 1"));
        assert!(score(u32::MAX).unwrap_err().contains("4294967295"));
    }
}
