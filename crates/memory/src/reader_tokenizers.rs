//! The reader tokenizers a long-lived door (a server, a Python `Memory`) counts budgets in,
//! each loaded once and shared by every request that names it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use evicortex_compiler::{ReaderTokenizer, ReaderTokenizerError, reader_tokenizer};

/// Reader tokenizers by name ([`reader_tokenizer`]), loaded on first use.
#[derive(Debug, Default)]
pub struct ReaderTokenizers(Mutex<HashMap<String, Arc<dyn ReaderTokenizer>>>);

impl ReaderTokenizers {
    /// The tokenizer `name` (`o200k_base`, `cl100k_base` or a `tokenizer.json` path), loaded
    /// the first time it is asked for. A door that must not open files a client names checks
    /// the name first.
    pub fn get(&self, name: &str) -> Result<Arc<dyn ReaderTokenizer>, ReaderTokenizerError> {
        let mut loaded = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(tokenizer) = loaded.get(name) {
            return Ok(Arc::clone(tokenizer));
        }
        let tokenizer: Arc<dyn ReaderTokenizer> = reader_tokenizer(name)?.into();
        loaded.insert(name.to_owned(), Arc::clone(&tokenizer));
        Ok(tokenizer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tokenizer_is_loaded_once_and_an_unknown_one_refused() {
        let tokenizers = ReaderTokenizers::default();
        let first = tokenizers.get("o200k_base").unwrap();
        assert!(Arc::ptr_eq(&first, &tokenizers.get("o200k_base").unwrap()));
        assert!(matches!(tokenizers.get("gpt2"), Err(ReaderTokenizerError::Unknown { .. })));
    }
}
