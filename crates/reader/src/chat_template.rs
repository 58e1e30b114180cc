//! The model's chat template (`tokenizer.chat_template`, Jinja) rendered the way Hugging Face
//! `apply_chat_template` renders it: `trim_blocks` and `lstrip_blocks` on, the messages as
//! `messages`, `add_generation_prompt` true, no tools, the special tokens' texts as `bos_token`
//! and `eos_token`, Python string methods available, and `raise_exception` failing the render.

use minijinja::{Environment, Error, ErrorKind, context};

use crate::chat::ChatMessage;

/// A compiled chat template.
pub struct ChatTemplate {
    env: Environment<'static>,
    bos_token: String,
    eos_token: String,
}

const TEMPLATE_NAME: &str = "chat_template";

impl ChatTemplate {
    /// Compiles `source`.
    pub(crate) fn compile(
        source: &str,
        bos_token: String,
        eos_token: String,
    ) -> Result<ChatTemplate, String> {
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", |message: String| -> Result<String, Error> {
            Err(Error::new(ErrorKind::InvalidOperation, message))
        });
        env.add_template_owned(TEMPLATE_NAME, source.to_owned()).map_err(|e| format!("{e:#}"))?;
        Ok(ChatTemplate { env, bos_token, eos_token })
    }

    /// The prompt text for `messages`, ending with the assistant's turn opened.
    pub fn render(&self, messages: &[ChatMessage]) -> Result<String, String> {
        let template = self.env.get_template(TEMPLATE_NAME).map_err(|e| format!("{e:#}"))?;
        template
            .render(context! {
                messages => messages,
                add_generation_prompt => true,
                bos_token => &self.bos_token,
                eos_token => &self.eos_token,
            })
            .map_err(|e| format!("{e:#}"))
    }
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate").finish_non_exhaustive()
    }
}
