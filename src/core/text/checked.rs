//! The parts of a tokenizer that match a regex, rebuilt so that a regex that gives up on a text is
//! that text's error.
//!
//! The crate matches the patterns of `Split` pre-tokenizers and `Replace` normalizers with
//! fancy-regex, whose backtracking gives up after a million steps (`(a|aa)+(?=b)|x` on a run of
//! 41 letters a; Oniguruma, the Python package's engine, gives up on `(a|aa)+(?=b)` already). The crate then ends the matching there without a word: the rest of the text goes
//! unsplit (or unreplaced), ids the Python package never gives (its Oniguruma raises there).
//! Here those parts match through `CheckedRegex`, which returns the give-up as an error, so the
//! document fails by name and the others are unaffected. Every other part is the crate's own,
//! and the parts rebuilt do what the crate's do otherwise (the same calls of `NormalizedString`
//! and `PreTokenizedString`, in the same order).

use fancy_regex::Regex;
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use tokenizers::tokenizer::pattern::{Invert, Pattern};
use tokenizers::{
    NormalizedString, Normalizer, NormalizerWrapper, Offsets, PreTokenizedString, PreTokenizer, PreTokenizerWrapper, SplitDelimiterBehavior,
};

/// A regex whose matching reports giving up rather than stopping.
#[derive(Debug)]
pub struct CheckedRegex(Regex);

impl CheckedRegex {
    /// # Errors
    /// Not a regex fancy-regex compiles.
    pub fn new(pattern: &str) -> Result<Self, String> {
        Regex::new(pattern).map(CheckedRegex).map_err(|error| format!("regex {pattern:?}: {error}"))
    }
}

impl Pattern for &CheckedRegex {
    /// The crate's own `find_matches` for its regexes, with an error where it would stop.
    fn find_matches(&self, inside: &str) -> tokenizers::Result<Vec<(Offsets, bool)>> {
        if inside.is_empty() {
            return Ok(vec![((0, 0), false)]);
        }
        let mut previous = 0;
        let mut splits = Vec::with_capacity(inside.len());
        for found in self.0.find_iter(inside) {
            let found = found.map_err(|error| format!("the tokenizer's regex {:?} gave up on this text ({error})", self.0.as_str()))?;
            if previous != found.start() {
                splits.push(((previous, found.start()), false));
            }
            splits.push(((found.start(), found.end()), true));
            previous = found.end();
        }
        if previous != inside.len() {
            splits.push(((previous, inside.len()), false));
        }
        Ok(splits)
    }
}

/// A normalizer as the file gives it, its regex `Replace`s checked.
#[derive(Debug)]
pub enum CheckedNormalizer {
    Replace { regex: CheckedRegex, content: String },
    Sequence(Vec<CheckedNormalizer>),
    Other(NormalizerWrapper),
}

impl CheckedNormalizer {
    fn from_value(value: Value) -> Result<Self, String> {
        match value.get("type").and_then(Value::as_str) {
            Some("Sequence") => match value.get("normalizers") {
                Some(Value::Array(steps)) => {
                    Ok(CheckedNormalizer::Sequence(steps.iter().cloned().map(Self::from_value).collect::<Result<_, _>>()?))
                }
                _ => Err("a Sequence normalizer without a list of \"normalizers\"".to_string()),
            },
            Some("Replace") if value.pointer("/pattern/Regex").is_some() => {
                let regex = value.pointer("/pattern/Regex").and_then(Value::as_str).ok_or("a Replace regex that is not text")?;
                let content = value.get("content").and_then(Value::as_str).ok_or("a Replace normalizer without its content")?;
                Ok(CheckedNormalizer::Replace { regex: CheckedRegex::new(regex)?, content: content.to_string() })
            }
            _ => serde_json::from_value(value).map(CheckedNormalizer::Other).map_err(|error| error.to_string()),
        }
    }
}

impl<'de> Deserialize<'de> for CheckedNormalizer {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Self::from_value(Value::deserialize(deserializer)?).map_err(serde::de::Error::custom)
    }
}

impl Normalizer for CheckedNormalizer {
    fn normalize(&self, normalized: &mut NormalizedString) -> tokenizers::Result<()> {
        match self {
            CheckedNormalizer::Replace { regex, content } => normalized.replace(regex, content),
            CheckedNormalizer::Sequence(steps) => steps.iter().try_for_each(|step| step.normalize(normalized)),
            CheckedNormalizer::Other(normalizer) => normalizer.normalize(normalized),
        }
    }
}

/// A pre-tokenizer as the file gives it, its regex `Split`s checked.
#[derive(Debug)]
pub enum CheckedPreTokenizer {
    Split { regex: CheckedRegex, behavior: SplitDelimiterBehavior, invert: bool },
    Sequence(Vec<CheckedPreTokenizer>),
    Other(PreTokenizerWrapper),
}

impl CheckedPreTokenizer {
    fn from_value(value: Value) -> Result<Self, String> {
        match value.get("type").and_then(Value::as_str) {
            Some("Sequence") => match value.get("pretokenizers") {
                Some(Value::Array(steps)) => {
                    Ok(CheckedPreTokenizer::Sequence(steps.iter().cloned().map(Self::from_value).collect::<Result<_, _>>()?))
                }
                _ => Err("a Sequence pre-tokenizer without a list of \"pretokenizers\"".to_string()),
            },
            Some("Split") if value.pointer("/pattern/Regex").is_some() => {
                let regex = value.pointer("/pattern/Regex").and_then(Value::as_str).ok_or("a Split regex that is not text")?;
                let behavior = value.get("behavior").cloned().ok_or("a Split pre-tokenizer without its behavior")?;
                let behavior = serde_json::from_value(behavior).map_err(|error| format!("a Split pre-tokenizer's behavior: {error}"))?;
                let invert = value.get("invert").and_then(Value::as_bool).ok_or("a Split pre-tokenizer without \"invert\"")?;
                Ok(CheckedPreTokenizer::Split { regex: CheckedRegex::new(regex)?, behavior, invert })
            }
            _ => serde_json::from_value(value).map(CheckedPreTokenizer::Other).map_err(|error| error.to_string()),
        }
    }
}

impl<'de> Deserialize<'de> for CheckedPreTokenizer {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Self::from_value(Value::deserialize(deserializer)?).map_err(serde::de::Error::custom)
    }
}

impl PreTokenizer for CheckedPreTokenizer {
    fn pre_tokenize(&self, pretokenized: &mut PreTokenizedString) -> tokenizers::Result<()> {
        match self {
            CheckedPreTokenizer::Split { regex, behavior, invert: true } => {
                pretokenized.split(|_, normalized| normalized.split(Invert(regex), *behavior))
            }
            CheckedPreTokenizer::Split { regex, behavior, invert: false } => {
                pretokenized.split(|_, normalized| normalized.split(regex, *behavior))
            }
            CheckedPreTokenizer::Sequence(steps) => steps.iter().try_for_each(|step| step.pre_tokenize(pretokenized)),
            CheckedPreTokenizer::Other(pre_tokenizer) => pre_tokenizer.pre_tokenize(pretokenized),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tokenizers::{OffsetReferential, OffsetType};

    /// Exponential on a run of a's without a b (the alternative keeps fancy-regex from skipping a
    /// text that has no b at all).
    const BACKTRACKING: &str = "(a|aa)+(?=b)|x";

    fn pieces(pre_tokenizer: &CheckedPreTokenizer, text: &str) -> tokenizers::Result<Vec<String>> {
        let mut pretokenized = PreTokenizedString::from(text);
        pre_tokenizer.pre_tokenize(&mut pretokenized)?;
        Ok(pretokenized
            .get_splits(OffsetReferential::Original, OffsetType::Byte)
            .into_iter()
            .map(|(piece, _, _)| piece.to_string())
            .collect())
    }

    #[test]
    fn a_regex_that_gives_up_is_an_error_where_the_crate_stops_silently() {
        let split = json!({"type": "Split", "pattern": {"Regex": BACKTRACKING}, "behavior": "Isolated", "invert": false});
        let checked = CheckedPreTokenizer::from_value(split.clone()).unwrap();
        let crate_own: PreTokenizerWrapper = serde_json::from_value(split).unwrap();
        // 41 letters without the "b" the look-ahead wants: the backtracking gives up on them,
        // before it reaches the "aab" that matches.
        let text = format!("{}c aab", "a".repeat(41));
        let error = pieces(&checked, &text).unwrap_err().to_string();
        assert!(error.contains("gave up on this text"), "{error}");
        let mut pretokenized = PreTokenizedString::from(text.as_str());
        crate_own.pre_tokenize(&mut pretokenized).unwrap(); // the crate's: no error, and the text left whole
        assert_eq!(pretokenized.get_splits(OffsetReferential::Original, OffsetType::Byte).len(), 1);
        // Where the regex finishes, the pieces are the crate's.
        assert_eq!(pieces(&checked, "xaab aab").unwrap(), ["x", "aa", "b ", "aa", "b"]);
    }

    #[test]
    fn sequences_and_other_parts_are_the_crates() {
        let sequence = json!({"type": "Sequence", "pretokenizers": [
            {"type": "Whitespace"},
            {"type": "Split", "pattern": {"Regex": "\\d"}, "behavior": "Isolated", "invert": false},
            {"type": "Split", "pattern": {"String": "-"}, "behavior": "Removed", "invert": false},
        ]});
        let checked = CheckedPreTokenizer::from_value(sequence.clone()).unwrap();
        let crate_own: PreTokenizerWrapper = serde_json::from_value(sequence).unwrap();
        let text = "ab1c-d ef 22";
        let mut pretokenized = PreTokenizedString::from(text);
        crate_own.pre_tokenize(&mut pretokenized).unwrap();
        let expected: Vec<String> = pretokenized
            .get_splits(OffsetReferential::Original, OffsetType::Byte)
            .into_iter()
            .map(|(piece, _, _)| piece.to_string())
            .collect();
        assert_eq!(pieces(&checked, text).unwrap(), expected);
        assert!(CheckedPreTokenizer::from_value(json!({"type": "Sequence"})).is_err());
    }

    #[test]
    fn a_replace_regex_that_gives_up_is_an_error() {
        let replace = json!({"type": "Sequence", "normalizers": [
            {"type": "Lowercase"},
            {"type": "Replace", "pattern": {"Regex": BACKTRACKING}, "content": "x"},
        ]});
        let checked = CheckedNormalizer::from_value(replace).unwrap();
        let mut fine = NormalizedString::from("AAB AB");
        checked.normalize(&mut fine).unwrap();
        assert_eq!(fine.get(), "xb xb");
        let mut hostile = NormalizedString::from("A".repeat(41));
        assert!(checked.normalize(&mut hostile).unwrap_err().to_string().contains("gave up"));
        assert!(CheckedNormalizer::from_value(json!({"type": "Replace", "pattern": {"Regex": "("}, "content": ""})).is_err());
    }
}
