//! The local reader by name, in the builds that have one: the light builds (without the feature
//! `local`, so without llama.cpp) keep the same API and refuse with a clear error.

use std::sync::Arc;

use crate::{Reader, ReaderModelError};

/// Whether this build runs GGUF readers in-process (the feature `local`: llama.cpp).
pub const LOCAL_READER_BUILT: bool = cfg!(feature = "local");

/// The pinned GGUF reader `name`, loaded and digest-checked
/// ([`LocalGgufReader::load_pinned`](crate::LocalGgufReader)), or, in a build without the local
/// reader, [`ReaderModelError::LocalReaderNotBuilt`].
pub fn load_local_reader(name: &str) -> Result<Arc<dyn Reader>, ReaderModelError> {
    #[cfg(feature = "local")]
    {
        let reader = crate::LocalGgufReader::load_pinned(name)?;
        Ok(Arc::new(reader))
    }
    #[cfg(not(feature = "local"))]
    {
        Err(ReaderModelError::LocalReaderNotBuilt { model: name.to_owned() })
    }
}
