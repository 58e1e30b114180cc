//! S4: the store directory and the embedding cache are private to their owner.
//! Embedded only: the modes of the store directory's own files (a PostgreSQL store has none).

use std::os::unix::fs::PermissionsExt;

use evicortex::Memory;

fn mode(path: &std::path::Path) -> u32 {
    fs_err::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn the_store_directory_and_embedding_cache_are_private() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("store");
    let memory = Memory::open(&dir).unwrap();
    assert_eq!(mode(&dir), 0o700);
    drop(memory);
    // The cache is created when the store is opened with an encoder.
    let memory = Memory::builder(&dir).encoder(encoder()).open().unwrap();
    let files: Vec<_> = fs_err::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    assert!(files.iter().any(|f| f.ends_with("embeddings.sqlite")), "{files:?}");
    for file in &files {
        assert_eq!(mode(file), 0o600, "{}", file.display());
    }
    // An older store, made before: restricted when next opened for writing.
    drop(memory);
    fs_err::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    fs_err::set_permissions(dir.join("embeddings.sqlite"), std::fs::Permissions::from_mode(0o644))
        .unwrap();
    let _memory = Memory::open(&dir).unwrap();
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&dir.join("embeddings.sqlite")), 0o600);
}

fn encoder() -> std::sync::Arc<dyn evicortex::Encoder> {
    match evicortex_embed::load_pinned_minilm(evicortex_embed::EncoderConfig::all_minilm_l6_v2()) {
        Ok(encoder) => std::sync::Arc::new(encoder),
        Err(err) => {
            panic!("{err}\nthis test needs the pinned weights: run `evicortex model fetch`")
        }
    }
}
