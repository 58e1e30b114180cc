//! A Qwen2 GGUF model dequantized to f32 at load and run with candle's dense Qwen2.
//!
//! Reading a prompt is a batch of matrix products. candle's quantized kernels take one dot
//! product per row and column (and without compile-time AVX they are scalar), while its f32
//! products go through a blocked, runtime-dispatched GEMM: on a two-core machine a 2,100-token
//! prompt of the 0.5B model took 247 s quantized and 31 s dense. Generating a token stays
//! memory-bound either way. The price is memory: four bytes a weight (about 2 GB for 0.5B).

use std::collections::HashMap;
use std::io::{Read, Seek};

use candle_core::{DType, Device, quantized::gguf_file};
use candle_nn::{Activation, VarBuilder};
use candle_transformers::models::qwen2::{Config, ModelForCausalLM};

/// Loads every tensor of `content`, dequantized, under the names candle's Qwen2 expects.
pub fn load<R: Read + Seek>(
    content: &gguf_file::Content,
    reader: &mut R,
    context_window: u32,
) -> candle_core::Result<ModelForCausalLM> {
    let device = Device::Cpu;
    let metadata_u32 = |key: &str| -> candle_core::Result<usize> {
        match content.metadata.get(key) {
            Some(value) => Ok(value.to_u32()? as usize),
            None => candle_core::bail!("GGUF metadata {key} is missing"),
        }
    };
    let metadata_f32 = |key: &str| -> candle_core::Result<Option<f64>> {
        content.metadata.get(key).map(|value| value.to_f32().map(f64::from)).transpose()
    };
    let mut tensors = HashMap::new();
    for name in content.tensor_infos.keys() {
        let tensor = content.tensor(reader, name, &device)?.dequantize(&device)?;
        tensors.insert(candle_name(name)?, tensor);
    }
    let embeddings = tensors.get("model.embed_tokens.weight").ok_or_else(|| {
        candle_core::Error::Msg("GGUF tensor token_embd.weight is missing".into())
    })?;
    let (vocab_size, _) = embeddings.dims2()?;
    let gate = tensors.get("model.layers.0.mlp.gate_proj.weight").ok_or_else(|| {
        candle_core::Error::Msg("GGUF tensor blk.0.ffn_gate.weight is missing".into())
    })?;
    let (intermediate_size, _) = gate.dims2()?;
    let tie_word_embeddings = !tensors.contains_key("lm_head.weight");
    let positions = context_window as usize;
    let config = Config {
        vocab_size,
        hidden_size: metadata_u32("qwen2.embedding_length")?,
        intermediate_size,
        num_hidden_layers: metadata_u32("qwen2.block_count")?,
        num_attention_heads: metadata_u32("qwen2.attention.head_count")?,
        num_key_value_heads: metadata_u32("qwen2.attention.head_count_kv")?,
        max_position_embeddings: positions,
        // No sliding window: every position attends to every earlier one, as in the GGUF path.
        sliding_window: positions,
        max_window_layers: 0,
        tie_word_embeddings,
        rope_theta: metadata_f32("qwen2.rope.freq_base")?.unwrap_or(10_000.0),
        rms_norm_eps: metadata_f32("qwen2.attention.layer_norm_rms_epsilon")?.ok_or_else(|| {
            candle_core::Error::Msg(
                "GGUF metadata qwen2.attention.layer_norm_rms_epsilon is missing".into(),
            )
        })?,
        use_sliding_window: false,
        hidden_act: Activation::Silu,
    };
    let tensor_count = tensors.len();
    let builder = VarBuilder::from_tensors(tensors, DType::F32, &device);
    let model = ModelForCausalLM::new(&config, builder)?;
    tracing::debug!(tensors = tensor_count, ?config, "dense qwen2 loaded");
    Ok(model)
}

/// The Hugging Face name of a GGUF tensor of a Qwen2 model; an unknown name is an error, so a
/// file with weights this mapping would drop is refused rather than run without them.
fn candle_name(gguf: &str) -> candle_core::Result<String> {
    let global = match gguf {
        "token_embd.weight" => Some("model.embed_tokens.weight"),
        "output_norm.weight" => Some("model.norm.weight"),
        "output.weight" => Some("lm_head.weight"),
        _ => None,
    };
    if let Some(name) = global {
        return Ok(name.to_owned());
    }
    let unknown = || candle_core::Error::Msg(format!("GGUF tensor {gguf} has no Qwen2 place"));
    let rest = gguf.strip_prefix("blk.").ok_or_else(unknown)?;
    let (layer, part) = rest.split_once('.').ok_or_else(unknown)?;
    let layer: usize = layer.parse().map_err(|_| unknown())?;
    let (module, kind) = part.rsplit_once('.').ok_or_else(unknown)?;
    let module = match module {
        "attn_q" => "self_attn.q_proj",
        "attn_k" => "self_attn.k_proj",
        "attn_v" => "self_attn.v_proj",
        "attn_output" => "self_attn.o_proj",
        "ffn_gate" => "mlp.gate_proj",
        "ffn_up" => "mlp.up_proj",
        "ffn_down" => "mlp.down_proj",
        "attn_norm" => "input_layernorm",
        "ffn_norm" => "post_attention_layernorm",
        _ => return Err(unknown()),
    };
    if kind != "weight" && kind != "bias" {
        return Err(unknown());
    }
    Ok(format!("model.layers.{layer}.{module}.{kind}"))
}

#[cfg(test)]
mod tests {
    use super::candle_name;

    #[test]
    fn gguf_names_map_to_the_dense_model_and_an_unknown_one_is_refused() {
        assert_eq!(candle_name("token_embd.weight").unwrap(), "model.embed_tokens.weight");
        assert_eq!(
            candle_name("blk.23.attn_q.bias").unwrap(),
            "model.layers.23.self_attn.q_proj.bias"
        );
        assert_eq!(
            candle_name("blk.0.ffn_norm.weight").unwrap(),
            "model.layers.0.post_attention_layernorm.weight"
        );
        for bad in ["blk.x.attn_q.weight", "blk.0.attn_qkv.weight", "rope_freqs.weight", "blk.1"] {
            let error = candle_name(bad).unwrap_err().to_string();
            assert!(error.contains(bad), "{error}");
        }
    }
}
