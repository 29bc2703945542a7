//! Python bindings of the text tokenizer: `TextTokenizer`, and `check_tokenizer_json` (the
//! limits of a `tokenizer.json`, checked before either tokenizer loads it).

use numpy::PyArray1;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::panic_guard::guard;
use crate::text::{precheck, tokenize};

/// Ids back to back and each text's length, as numpy arrays.
type IdsAndLengths<'py> = (Bound<'py, PyArray1<u32>>, Bound<'py, PyArray1<i64>>);

/// Raise ValueError for a `tokenizer.json` (its text) past `text::limits`: normalizers that can
/// grow a text more than `MAX_GROWTH` times, a token id past `MAX_TOKEN_ID`. Checked before the
/// Python package loads it too: loading already normalizes its added tokens. Read in one pass,
/// the vocabulary not held.
#[pyfunction]
pub fn check_tokenizer_json(py: Python<'_>, json: &str) -> PyResult<()> {
    guard("check_tokenizer_json", None, || py.detach(|| precheck::check_file(json)).map_err(PyValueError::new_err))
}

/// A `tokenizer.json` loaded in the native core; see `stoker.ops.Tokenizer`, which uses it.
#[pyclass(frozen, module = "stoker._native")]
pub struct TextTokenizer {
    inner: tokenize::TextTokenizer,
}

#[pymethods]
impl TextTokenizer {
    #[new]
    #[pyo3(signature = (json, add_special_tokens=false, bos=None, eos=None))]
    fn new(json: &str, add_special_tokens: bool, bos: Option<u32>, eos: Option<u32>) -> PyResult<Self> {
        guard("TextTokenizer()", None, || {
            let inner = tokenize::TextTokenizer::from_json(json, add_special_tokens, bos, eos)
                .map_err(|error| PyValueError::new_err(format!("not a tokenizer the native core reads: {error}")))?;
            Ok(TextTokenizer { inner })
        })
    }

    /// Token ids of `texts` back to back (`uint32`, the marks included) and each one's length
    /// (`int64`); the GIL is released from the copy of the texts on.
    fn encode<'py>(&self, py: Python<'py>, texts: Vec<String>) -> PyResult<IdsAndLengths<'py>> {
        guard("TextTokenizer.encode", None, || {
            let encoded = py.detach(|| self.inner.encode(&texts)).map_err(PyValueError::new_err)?;
            Ok((PyArray1::from_vec(py, encoded.ids), PyArray1::from_vec(py, encoded.lengths)))
        })
    }
}
