use super::*;

fn refused_text(cache: &EmbeddingCache, text: &str) -> TextDigest {
    let digest = TextDigest::of(text);
    let identity = EncoderIdentityDigest::from_bytes([7; 32]);
    cache.put_refused(&identity, &[(digest, 900)]).unwrap();
    digest
}

#[test]
fn a_purge_that_a_reader_keeps_from_checkpointing_says_so_and_a_retry_finishes_it() {
    let dir = tempfile::tempdir().unwrap();
    let cache = EmbeddingCache::open(dir.path()).unwrap();
    let text = refused_text(&cache, "a text to erase");
    let path = dir.path().join(EMBEDDINGS_FILE);
    let reader = Connection::open(&path).unwrap();
    reader.execute_batch("BEGIN; SELECT count(*) FROM refused;").unwrap();

    let err = cache.purge_texts(&[text]).unwrap_err();
    assert!(matches!(err, EmbeddingCacheError::ScrubIncomplete { .. }), "{err}");
    assert_eq!(err.class(), ErrorClass::Io);
    assert!(err.to_string().contains("erase the same target again"), "{err}");

    reader.execute_batch("COMMIT;").unwrap();
    cache.purge_texts(&[text]).unwrap();
    let wal = fs_err::metadata(dir.path().join(format!("{EMBEDDINGS_FILE}-wal"))).unwrap();
    assert_eq!(wal.len(), 0, "the checkpoint truncated the write-ahead log");
}
