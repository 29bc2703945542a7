//! What a `tokenizer.json` may ask of memory, checked before anything is encoded with it (and
//! before the crate allocates what it asks for: an allocation that fails aborts the process).
//!
//! - **Growth** (`check_growth`): normalizers rewrite the text before it is split. Each has a
//!   worst case, in bytes out per byte in: `Replace` with a pattern that matches the empty string
//!   inserts its content between every two characters (eight `Replace("")` of two bytes grew 240
//!   bytes of text to 1.5 MB, and a 4 MB document past memory), `Prepend` adds its text to every
//!   section, the Unicode forms expand at most 3 (NFC, NFD) or 11 (NFKC, NFKD) times. A chain
//!   multiplies them; one whose product is over `MAX_GROWTH` is refused, naming its steps. The
//!   published tokenizers measured stay far below it (Llama's Prepend and Replace: 12; T5's and
//!   XLM-R's precompiled charsmap and Replace: 33).
//! - **Lengths** (`check_lengths`): fixed padding (and `pad_to_multiple_of`) at most
//!   `MAX_PADDED_LENGTH` tokens (10^9 aborted the process), and a truncation stride below the
//!   length it leaves (the crate panics otherwise).
//! - **Ids** (`check_largest_id`): at most `MAX_TOKEN_ID`. The crate writes a vocabulary id by
//!   id, from 0 to its largest, noting each id it lacks: one token given the id 10^9 made the
//!   Python package's `to_str` (which stoker calls to make its native copy) run for good and grow
//!   without bound.
//!
//! `precheck` reads a file for these checks before anything loads it.

use serde_json::Value;
use tokenizers::{PaddingParams, PaddingStrategy, TruncationParams};

/// The most a chain of normalizers may grow a text, in the worst case: bytes out per byte in.
pub const MAX_GROWTH: u64 = 64;

/// The largest token id a tokenizer may give: 2^22, 4 times the largest vocabulary published
/// (about a million tokens). Reading a vocabulary id by id up to it takes milliseconds.
pub const MAX_TOKEN_ID: u64 = 1 << 22;

/// The most tokens a document may be padded to (fixed padding, or a multiple to pad to):
/// 2^20, far past any model's context, and about 70 MB of encoding a document at most.
pub const MAX_PADDED_LENGTH: usize = 1 << 20;

/// Worst-case growth of the Unicode forms in UTF-8 (Unicode's UAX #15, "Stream-Safe Text
/// Format": NFC and NFD 3x, NFKC and NFKD 11x), of lowercasing (two-byte capitals with
/// three-byte small letters: 1.5x), of the byte-level alphabet (a byte to a character of up to two
/// bytes), and of BERT's normalizer (spaces around CJK characters, accents split off by NFD,
/// lowercasing: 5/3 x 3 x 1.5).
const NORMAL_FORM_GROWTH: u64 = 3;
const COMPATIBILITY_FORM_GROWTH: u64 = 11;
const LOWERCASE_GROWTH: u64 = 2;
const BYTE_LEVEL_GROWTH: u64 = 2;
const BERT_GROWTH: u64 = 8;

/// Refuse a tokenizer whose largest token id (its vocabulary's, or an added token's) is past
/// `MAX_TOKEN_ID`.
///
/// # Errors
/// The reason, naming the id.
pub fn check_largest_id(largest: u64) -> Result<(), String> {
    if largest > MAX_TOKEN_ID {
        return Err(format!(
            "a token id of {largest}, over the limit of {MAX_TOKEN_ID}: its vocabulary is read id by id up to its largest"
        ));
    }
    Ok(())
}

/// Refuse a tokenizer whose normalizer (the file's `"normalizer"`, or null) can grow a text more
/// than `MAX_GROWTH` times.
///
/// # Errors
/// The reason, naming the normalizers and their worst cases.
pub fn check_growth(normalizer: &Value) -> Result<(), String> {
    if normalizer.is_null() {
        return Ok(());
    }
    let mut steps = Vec::new();
    let growth = growth(normalizer, &mut steps, 0)?;
    if growth > MAX_GROWTH {
        return Err(format!(
            "its normalizers can grow a text {} times ({}), over the limit of {MAX_GROWTH}: a document would take that many times its \
             memory",
            if growth == u64::MAX { "unboundedly many".to_string() } else { growth.to_string() },
            steps.join(" x ")
        ));
    }
    Ok(())
}

/// The worst-case growth of `normalizer` (bytes out per byte in), each step's noted in `steps`.
fn growth(normalizer: &Value, steps: &mut Vec<String>, depth: usize) -> Result<u64, String> {
    if depth > 32 {
        return Err("its normalizers are nested more than 32 deep".to_string());
    }
    let kind = normalizer.get("type").and_then(Value::as_str).ok_or("a normalizer without a \"type\"")?;
    let factor = match kind {
        "Sequence" => {
            let inner = normalizer.get("normalizers").and_then(Value::as_array).ok_or("a Sequence normalizer without \"normalizers\"")?;
            return inner.iter().try_fold(1_u64, |total, step| Ok(total.saturating_mul(growth(step, steps, depth + 1)?)));
        }
        "Replace" => replace_growth(normalizer)?,
        "Prepend" => 1 + text_field(normalizer, "prepend")?.len() as u64,
        "Precompiled" => precompiled_growth(normalizer)?,
        "NFC" | "NFD" => NORMAL_FORM_GROWTH,
        "NFKC" | "NFKD" => COMPATIBILITY_FORM_GROWTH,
        "Lowercase" => LOWERCASE_GROWTH,
        "ByteLevel" => BYTE_LEVEL_GROWTH,
        "BertNormalizer" => BERT_GROWTH,
        "Strip" | "StripAccents" | "Nmt" => 1,
        other => return Err(format!("a normalizer of type {other:?}, whose growth stoker does not know")),
    };
    if factor > 1 {
        steps.push(format!("{kind} {factor}"));
    }
    Ok(factor)
}

fn text_field<'a>(normalizer: &'a Value, name: &str) -> Result<&'a str, String> {
    normalizer.get(name).and_then(Value::as_str).ok_or_else(|| format!("a normalizer without its {name:?} text"))
}

/// A `Replace`'s worst case: each match (at least `shortest` bytes) becomes `content`; a
/// pattern that can match the empty string can put `content` between every two bytes.
fn replace_growth(normalizer: &Value) -> Result<u64, String> {
    let content = text_field(normalizer, "content")?.len() as u64;
    let pattern = normalizer.get("pattern").ok_or("a Replace normalizer without a pattern")?;
    let shortest = if let Some(text) = pattern.get("String").and_then(Value::as_str) {
        text.len() as u64
    } else if let Some(regex) = pattern.get("Regex").and_then(Value::as_str) {
        // A pattern regex-syntax cannot read (a look-around, a back-reference) counts as one
        // that may match the empty string.
        regex_syntax::Parser::new().parse(regex).ok().and_then(|syntax| syntax.properties().minimum_len()).unwrap_or(0) as u64
    } else {
        return Err("a Replace normalizer whose pattern is neither a String nor a Regex".to_string());
    };
    Ok(if shortest == 0 { 1 + content } else { content.div_ceil(shortest).max(1) })
}

/// A precompiled charsmap's worst case: its longest replacement, for a character of one byte.
/// The map is the base64 of a trie's size (4 bytes, little-endian), the trie, then the
/// replacements, each ended by a zero byte. A trie larger than the map is refused here: the
/// crate reserves memory for the size it declares before it reads the trie.
fn precompiled_growth(normalizer: &Value) -> Result<u64, String> {
    let encoded = text_field(normalizer, "precompiled_charsmap")?;
    let map = base64::decode(encoded).map_err(|error| format!("a precompiled charsmap that is not base64: {error}"))?;
    let trie = map
        .get(..4)
        .map(|size| u32::from_le_bytes([size[0], size[1], size[2], size[3]]) as usize)
        .ok_or("an empty precompiled charsmap")?;
    let replacements = map.get(4usize.saturating_add(trie)..).ok_or("a precompiled charsmap shorter than its trie")?;
    Ok(replacements.split(|&byte| byte == 0).map(<[u8]>::len).max().unwrap_or(0).max(1) as u64)
}

/// Refuse padding past `MAX_PADDED_LENGTH` tokens, and a truncation whose stride is not below
/// the length it leaves (its `max_length` less the `special_tokens` the post-processor adds).
///
/// # Errors
/// The reason, naming the setting.
pub fn check_lengths(padding: Option<&PaddingParams>, truncation: Option<&TruncationParams>, special_tokens: usize) -> Result<(), String> {
    if let Some(padding) = padding {
        if let PaddingStrategy::Fixed(length) = padding.strategy {
            if length > MAX_PADDED_LENGTH {
                return Err(format!("its padding to {length} tokens is over the limit of {MAX_PADDED_LENGTH}"));
            }
        }
        if let Some(multiple) = padding.pad_to_multiple_of.filter(|&multiple| multiple > MAX_PADDED_LENGTH) {
            return Err(format!("its padding to a multiple of {multiple} tokens is over the limit of {MAX_PADDED_LENGTH}"));
        }
    }
    if let Some(truncation) = truncation {
        let kept = truncation.max_length.checked_sub(special_tokens);
        if kept.is_none_or(|kept| truncation.stride >= kept) {
            return Err(format!(
                "its truncation's stride of {} is not below the {} tokens it keeps (max_length {} less {special_tokens} special tokens)",
                truncation.stride,
                kept.unwrap_or(0),
                truncation.max_length
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn replace(pattern: Value, content: &str) -> Value {
        json!({"type": "Replace", "pattern": pattern, "content": content})
    }

    #[test]
    fn an_empty_pattern_grows_by_its_content_and_eight_of_them_are_refused() {
        let step = replace(json!({"String": ""}), "ab");
        assert!(check_growth(&json!({"type": "Sequence", "normalizers": [step.clone(), step.clone(), step.clone()]})).is_ok());
        let eight = json!({"type": "Sequence", "normalizers": vec![step; 8]});
        let error = check_growth(&eight).unwrap_err();
        assert!(error.contains("6561 times") && error.contains("Replace 3 x Replace 3"), "{error}");
        // An empty content adds nothing, wherever it matches.
        assert!(check_growth(&json!({"type": "Sequence", "normalizers": vec![replace(json!({"String": ""}), ""); 8]})).is_ok());
    }

    #[test]
    fn a_regex_grows_by_its_content_over_its_shortest_match() {
        let growth_of = |pattern: &str, content: &str| replace_growth(&replace(json!({"Regex": pattern}), content)).unwrap();
        assert_eq!(growth_of(" {2,}", " "), 1); // T5's: shrinks
        assert_eq!(growth_of("a", "0123456789"), 10);
        assert_eq!(growth_of("ab|abcd", "0123456789"), 5);
        assert_eq!(growth_of("a*", "xyz"), 4); // matches the empty string
        assert_eq!(growth_of("(?=a)", "xyz"), 4); // a look-ahead: read as one that may match nothing
        assert_eq!(replace_growth(&replace(json!({"String": "▁"}), " ")).unwrap(), 1);
        assert_eq!(replace_growth(&replace(json!({"String": " "}), "▁")).unwrap(), 3);
        // Llama's
    }

    #[test]
    fn published_chains_pass_and_compounding_ones_are_refused() {
        let llama = json!({"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"}, replace(json!({"String": " "}), "▁")]});
        assert!(check_growth(&llama).is_ok());
        assert!(check_growth(&json!({"type": "NFKC"})).is_ok());
        assert!(check_growth(&Value::Null).is_ok());
        let compounding = json!({"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Prepend", "prepend": "▁▁"}]});
        assert!(check_growth(&compounding).unwrap_err().contains("77 times"));
        let nested = (0..40).fold(json!({"type": "NFC"}), |inner, _| json!({"type": "Sequence", "normalizers": [inner]}));
        assert!(check_growth(&nested).unwrap_err().contains("32 deep"));
        assert!(check_growth(&json!({"type": "Unheard"})).unwrap_err().contains("\"Unheard\""));
    }

    #[test]
    fn a_precompiled_map_grows_by_its_longest_replacement() {
        let mut map = 2_u32.to_le_bytes().to_vec();
        map.extend([7, 7]); // a trie of two bytes
        map.extend(b"ab\0abcdefgh\0c\0");
        let encoded = base64::encode(&map);
        assert_eq!(precompiled_growth(&json!({"type": "Precompiled", "precompiled_charsmap": encoded})).unwrap(), 8);
        let short = base64::encode([200, 0, 0, 0, 1]);
        assert!(precompiled_growth(&json!({"type": "Precompiled", "precompiled_charsmap": short})).is_err());
        assert!(precompiled_growth(&json!({"type": "Precompiled", "precompiled_charsmap": "@@"})).is_err());
    }

    #[test]
    fn an_id_past_the_limit_is_refused() {
        assert!(check_largest_id(262_143).is_ok());
        assert!(check_largest_id(MAX_TOKEN_ID).is_ok());
        assert!(check_largest_id(1_000_000_000).unwrap_err().contains("a token id of 1000000000"));
    }

    fn padding(strategy: PaddingStrategy, multiple: Option<usize>) -> PaddingParams {
        PaddingParams { strategy, pad_to_multiple_of: multiple, ..PaddingParams::default() }
    }

    #[test]
    fn padding_past_the_limit_is_refused_before_it_is_allocated() {
        assert!(check_lengths(Some(&padding(PaddingStrategy::Fixed(512), None)), None, 0).is_ok());
        assert!(check_lengths(Some(&padding(PaddingStrategy::BatchLongest, Some(64))), None, 0).is_ok());
        let error = check_lengths(Some(&padding(PaddingStrategy::Fixed(1_000_000_000), None)), None, 0).unwrap_err();
        assert!(error.contains("1000000000 tokens"), "{error}");
        assert!(check_lengths(Some(&padding(PaddingStrategy::BatchLongest, Some(1 << 30))), None, 0).is_err());
    }

    #[test]
    fn a_stride_not_below_the_length_kept_is_refused() {
        let truncation = |max_length, stride| TruncationParams { max_length, stride, ..TruncationParams::default() };
        assert!(check_lengths(None, Some(&truncation(8, 2)), 0).is_ok());
        assert!(check_lengths(None, Some(&truncation(4, 10)), 0).unwrap_err().contains("stride of 10"));
        assert!(check_lengths(None, Some(&truncation(8, 6)), 2).is_err()); // 8 less 2 special tokens keeps 6
        assert!(check_lengths(None, Some(&truncation(1, 0)), 2).is_err()); // fewer than the special tokens
    }
}
