//! `evicortex answer`: compile a cited context for a question in the reader's own tokens, have
//! the reader read it, and print its answer with the records it cited, or the abstention.

use std::{io::Write, path::Path, sync::Arc};

use crate::{commands::compile::Switch, exit::UsageError};
use anyhow::Context;
use evicortex::{
    AnswerRequest, ChatCompletionsClient, CompileConfig, DecodingSettings, DenseConfig,
    GgufManifest, LocalGgufReader, Memory, Reader, RerankConfig, reader_tokenizer,
};

/// Arguments of `evicortex answer`.
#[derive(Debug, clap::Args)]
#[command(after_help = "The local reader runs on the CPU from pinned weights (`evicortex model \
    fetch NAME` installs them; `evicortex model list` names them) and counts the budget in its \
    own tokenizer. --endpoint asks the OpenAI-compatible chat-completions API named by \
    EVICORTEX_READER_BASE_URL, EVICORTEX_READER_MODEL, EVICORTEX_READER_API_KEY (optional) and \
    EVICORTEX_READER_CONTEXT_WINDOW (optional), and needs --reader-tokenizer. The reader's whole \
    prompt is counted first; one over its window is refused with the numbers. When the compiler \
    abstains the reader is not asked.\n\n\
    Examples:\n  \
    evicortex answer --namespace alice --query \"Where did I move?\" --budget 2048\n  \
    evicortex answer --namespace alice --query Q --budget 1024 --reader smollm2-135m-instruct-q4_1 --json\n  \
    evicortex answer --namespace alice --query Q --budget 4000 --endpoint --reader-tokenizer o200k_base")]
pub struct AnswerArgs {
    #[command(flatten)]
    pub question: crate::commands::compile::QuestionArgs,
    /// The local reader (a pinned GGUF model; default: the first of `evicortex model list`'s
    /// readers).
    #[arg(long, value_name = "NAME", conflicts_with = "endpoint")]
    pub reader: Option<String>,
    /// Ask the chat-completions endpoint the environment names instead of a local reader.
    #[arg(long, requires = "reader_tokenizer")]
    pub endpoint: bool,
    /// With --endpoint: the tokenizer the endpoint's model uses (o200k_base, cl100k_base or a
    /// tokenizer.json path), which the budget is counted in.
    #[arg(long, value_name = "NAME", requires = "endpoint")]
    pub reader_tokenizer: Option<String>,
    /// Most tokens the reader may generate.
    #[arg(long, default_value_t = 64, value_name = "N")]
    pub max_new_tokens: u32,
    /// Dense retrieval with the pinned encoder.
    #[arg(long, value_enum, default_value = "on")]
    pub dense: Switch,
    /// Candidates taken from each retriever.
    #[arg(long, default_value_t = evicortex::DEFAULT_TOP_N, value_name = "N")]
    pub top_n: usize,
    /// Rerank the best 16 fused candidates with the reranker --reranker names.
    #[arg(long, value_enum, default_value = "off")]
    pub rerank: Switch,
    /// The reranker --rerank on uses (as for `evicortex compile`).
    #[arg(long, value_name = "SPEC", default_value = evicortex::RerankerSpec::MPNET_COSINE)]
    pub reranker: evicortex::RerankerSpec,
    /// Abstain (without asking the reader) when the support score is below this.
    #[arg(long, value_name = "SCORE")]
    pub abstain_below: Option<f32>,
    /// Print the answer, its citations, the reader's identity, tokens and seconds as JSON.
    #[arg(long)]
    pub json: bool,
}

/// The reader `--reader`/`--endpoint` name.
pub fn open_reader(name: Option<&str>, endpoint: bool) -> anyhow::Result<Arc<dyn Reader>> {
    if endpoint {
        let client = ChatCompletionsClient::from_env()
            .map_err(|e| UsageError(format!("--endpoint: {e}")))?;
        return Ok(Arc::new(client));
    }
    let name = match name {
        Some(name) => name.to_owned(),
        None => GgufManifest::committed()[0].name.clone(),
    };
    let spinner = crate::progress::spinner(&format!("loading reader {name}"));
    let reader = LocalGgufReader::load_pinned(&name);
    spinner.finish_and_clear();
    Ok(Arc::new(reader.with_context(|| format!("loading the reader {name}"))?))
}

/// The committed default ([`CompileConfig::default_with`], as `compile`, HTTP, MCP and Python
/// use it) with the flags applied: with the flags' defaults, the context the other doors compile.
fn compile_config(args: &AnswerArgs) -> CompileConfig {
    let dense = match args.dense {
        Switch::On => DenseConfig::On { top_n: args.top_n },
        Switch::Off => DenseConfig::Off,
    };
    let mut config = CompileConfig::default_with(args.top_n, dense);
    if args.rerank == Switch::On {
        config.rerank = RerankConfig::On { depth: 16, weight: 1.0 };
    }
    config.abstention.threshold = args.abstain_below;
    config
}

/// Runs `evicortex answer`.
pub fn run(store: &Path, args: &AnswerArgs) -> anyhow::Result<()> {
    let query = args.question.query()?;
    let tokenizer = match &args.reader_tokenizer {
        Some(name) => Some(
            reader_tokenizer(name).map_err(|e| UsageError(format!("--reader-tokenizer: {e}")))?,
        ),
        None => None,
    };
    let config = compile_config(args);
    config.validate().map_err(|e| UsageError(e.to_string()))?;
    let mut builder = Memory::builder(store);
    crate::commands::compile::store_for_compile(store, &config, &mut builder)?;
    let reader = open_reader(args.reader.as_deref(), args.endpoint)?;
    if args.rerank == Switch::On {
        builder.loaded_reranker(crate::commands::compile::load_reranker(&args.reranker)?);
    }
    if config.dense != DenseConfig::Off {
        builder.store_encoders(None).context("loading the store's encoders")?;
    }
    let memory =
        builder.open().with_context(|| format!("opening the store {}", store.display()))?;
    crate::commands::compile::caught_up(&memory, &query.namespace, &config)?;
    let request = AnswerRequest {
        query: &query,
        config: &config,
        query_vectors: &[],
        tokenizer: tokenizer.as_deref(),
        question_date: None,
        decoding: DecodingSettings::greedy(args.max_new_tokens),
    };
    let spinner = crate::progress::spinner("reading");
    let report = memory.answer(&request, reader.as_ref());
    spinner.finish_and_clear();
    let report = report?;
    let mut out = crate::stdout::stdout();
    if args.json {
        writeln!(out, "{}", report.to_json())?;
        return Ok(());
    }
    match &report.answer {
        None => writeln!(
            out,
            "abstain: {}",
            report
                .context
                .abstain_reason
                .as_ref()
                .map_or("no support".to_owned(), |r| r.to_string())
        )?,
        Some(answer) => {
            writeln!(out, "{}", answer.text.trim())?;
            let cited: Vec<String> =
                answer.citations.iter().map(|r| format!("#{}", r.raw())).collect();
            writeln!(out, "---")?;
            writeln!(
                out,
                "cited: {}{}",
                if cited.is_empty() { "none".to_owned() } else { cited.join(" ") },
                if answer.unknown_citations.is_empty() {
                    String::new()
                } else {
                    format!(" (not in the context: {:?})", answer.unknown_citations)
                }
            )?;
            writeln!(
                out,
                "reader: {}; prompt {} tokens (context {} of {}), generated {}, {:.1} s",
                answer.reader.label(),
                answer.prompt_tokens,
                report.context.tokens_used,
                report.context.budget.tokens(),
                answer.generated_tokens,
                answer.seconds
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: AnswerArgs,
    }

    fn config(flags: &[&str]) -> CompileConfig {
        let base = ["answer", "--namespace", "alice", "--query", "q", "--budget", "100"];
        compile_config(&Cli::parse_from(base.iter().chain(flags)).args)
    }

    #[test]
    fn the_flags_defaults_are_the_facade_default_of_every_door() {
        assert_eq!(config(&[]), CompileConfig::default_for(true));
        assert_eq!(config(&["--dense", "off"]), CompileConfig::default_for(false));
        let tuned = config(&["--top-n", "20", "--abstain-below", "0.3"]);
        assert_eq!(tuned.lexical.top_n, 20);
        assert_eq!(tuned.abstention.threshold, Some(0.3));
    }
}
