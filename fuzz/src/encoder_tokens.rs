//! The encoder's tokenizer (the pinned all-MiniLM-L6-v2 `tokenizer.json`, digest-verified from the
//! model cache; no weights loaded): any text, through the same steps as `embed` (tokenise, then
//! the overlength policy). No panic; every sequence fits the maximum length, starts with [CLS],
//! ends with [SEP]; windows cover the content tokens in order, without gaps.

use std::sync::OnceLock;

use evicortex_embed::{DEFAULT_MODEL, EncoderTokenizer, ModelCache, Overlength, pinned_model};

struct Pinned {
    tokenizer: EncoderTokenizer,
    max_tokens: usize,
    policies: Vec<Overlength>,
}

fn pinned() -> &'static Pinned {
    static PINNED: OnceLock<Pinned> = OnceLock::new();
    PINNED.get_or_init(|| {
        let model = pinned_model(DEFAULT_MODEL).unwrap();
        let cache = ModelCache::from_env().unwrap();
        let artifacts = cache.open_verified(model.manifest()).unwrap_or_else(|e| {
            panic!("the encoder_tokens target needs the pinned {DEFAULT_MODEL}: {e}")
        });
        let tokenizer = EncoderTokenizer::load(artifacts.bytes("tokenizer.json").unwrap()).unwrap();
        let config = model.default_config();
        let policies = vec![
            config.overlength,
            Overlength::Truncate,
            Overlength::Refuse,
            Overlength::Window { overlap_tokens: 0 },
            Overlength::Window { overlap_tokens: config.max_tokens - 3 },
        ];
        Pinned { tokenizer, max_tokens: config.max_tokens, policies }
    })
}

/// One input (what libFuzzer calls the target with): panics on a violated property.
pub fn run(data: &[u8]) {
    let pinned = pinned();
    let text = String::from_utf8_lossy(data).into_owned();
    let ids = match pinned.tokenizer.encode_all(std::slice::from_ref(&text)) {
        Ok(mut ids) => ids.remove(0),
        Err(e) => panic!("tokenising text failed: {e}"),
    };
    assert!(ids.len() >= 2, "no [CLS] [SEP] around {text:?}");
    let (cls, sep) = (ids[0], ids[ids.len() - 1]);
    let content = &ids[1..ids.len() - 1];
    // Small maxima make windows common even for short inputs.
    for max_tokens in [pinned.max_tokens, 3, 4, 7] {
        for &policy in &pinned.policies {
            let policy = match policy {
                Overlength::Window { overlap_tokens } if overlap_tokens + 2 >= max_tokens => {
                    Overlength::Window { overlap_tokens: max_tokens - 3 }
                }
                other => other,
            };
            let Ok(inputs) = pinned.tokenizer.model_inputs(0, ids.clone(), max_tokens, policy)
            else {
                assert!(ids.len() > max_tokens && policy == Overlength::Refuse);
                continue;
            };
            let mut covered = 0;
            for input in &inputs {
                let seq = &input.token_ids;
                assert!(seq.len() <= max_tokens, "a sequence of {} > {max_tokens}", seq.len());
                assert_eq!((seq[0], seq[seq.len() - 1]), (cls, sep));
                assert_eq!(&seq[1..seq.len() - 1], &content[input.content_tokens.clone()]);
                assert!(
                    input.content_tokens.start <= covered,
                    "a gap before {:?}",
                    input.content_tokens
                );
                covered = covered.max(input.content_tokens.end);
            }
            match policy {
                Overlength::Truncate => assert!(covered == content.len().min(max_tokens - 2)),
                _ => assert_eq!(covered, content.len(), "windows miss content tokens"),
            }
        }
    }
}
