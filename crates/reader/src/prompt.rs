//! The answer prompt: a question and a compiled context (or none) as chat messages that ask for
//! a short answer citing the records it used, or an explicit abstention.

use std::collections::BTreeSet;

use evicortex_core::TurnId;
use serde::Serialize;

use crate::{chat::ChatMessage, citations::parse_citations};

/// What the reader must reply, verbatim, when the evidence does not answer the question. It is
/// also the phrase LoCoMo's released scorer accepts for unanswerable questions.
pub const ABSTENTION_REPLY: &str = "No information available.";

/// What the evidence block says when the context is empty.
pub const NO_EVIDENCE: &str = "No evidence was found in memory.";

const SYSTEM: &str = "You answer questions about a user's past conversations. Use only the \
evidence given: conversation turns, each starting with its record id in brackets, such as [#12].";

/// One question to answer.
#[derive(Copy, Clone, Debug)]
pub struct AnswerRequest<'a> {
    /// The question, verbatim.
    pub question: &'a str,
    /// The compiled context's text; empty when there is none (an abstaining compile, or the
    /// no-memory control).
    pub context: &'a str,
    /// When the question is asked (`2023/05/30 (Tue) 23:40`), for questions about time.
    pub question_date: Option<&'a str>,
}

/// The messages for one question, and the records its context cites.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AnswerPrompt {
    /// What the reader is given.
    pub messages: Vec<ChatMessage>,
    /// Every record cited in the context, ascending.
    pub context_records: Vec<TurnId>,
}

/// Builds the answer prompt.
pub fn build_answer_prompt(request: &AnswerRequest<'_>) -> AnswerPrompt {
    let context = request.context.trim_end();
    let evidence = if context.is_empty() { NO_EVIDENCE } else { context };
    let mut user = String::with_capacity(evidence.len() + request.question.len() + 400);
    user.push_str(evidence);
    user.push_str("\n\n");
    if let Some(date) = request.question_date {
        user.push_str("Today is ");
        user.push_str(date);
        user.push_str(".\n");
    }
    user.push_str("Question: ");
    user.push_str(request.question);
    user.push_str(
        "\n\nAnswer the question in one short sentence based on the evidence above, then give \
         the record ids of the turns you used in brackets, such as [#12]. Only if nothing above \
         bears on the question, reply: ",
    );
    user.push_str(ABSTENTION_REPLY);
    let context_records: BTreeSet<TurnId> =
        parse_citations(context).into_iter().map(TurnId::from_raw).collect();
    AnswerPrompt {
        messages: vec![ChatMessage::system(SYSTEM), ChatMessage::user(user)],
        context_records: context_records.into_iter().collect(),
    }
}

impl AnswerPrompt {
    /// BLAKE3 (hex) of the messages' JSON: the prompt part of an answer-cache key.
    pub fn digest(&self) -> String {
        let json = serde_json::to_vec(&self.messages).expect("messages serialise");
        blake3::hash(&json).to_hex().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_holds_context_question_date_and_instructions() {
        let context = "Evidence from memory, oldest first. Cite as [#record].\n\nSession s1 \
                       (2024-05-02):\n[#12] 10:00 user: I moved to Lisbon.\n[#13 #57] 10:01 \
                       assistant: Nice!\n";
        let prompt = build_answer_prompt(&AnswerRequest {
            question: "Where did I move?",
            context,
            question_date: Some("2024/06/01 (Sat) 10:00"),
        });
        let user = &prompt.messages[1].content;
        assert!(user.starts_with(context.trim_end()), "{user}");
        assert!(user.contains("Today is 2024/06/01 (Sat) 10:00.\nQuestion: Where did I move?"));
        assert!(user.ends_with("reply: No information available."), "{user}");
        let records: Vec<u64> = prompt.context_records.iter().map(|r| r.raw()).collect();
        assert_eq!(records, [12, 13, 57]);
    }

    #[test]
    fn empty_context_says_so_and_digest_tracks_the_text() {
        let a =
            build_answer_prompt(&AnswerRequest { question: "q", context: "", question_date: None });
        assert!(a.messages[1].content.starts_with(NO_EVIDENCE));
        assert!(a.context_records.is_empty());
        let b = build_answer_prompt(&AnswerRequest {
            question: "q?",
            context: "",
            question_date: None,
        });
        assert_ne!(a.digest(), b.digest());
        assert_eq!(a.digest(), a.clone().digest());
    }
}
