//! LongMemEval's released answer judge: the prompt per question type, the judge's decoding and
//! how its reply becomes a label.
//!
//! The prompt texts are those of `get_anscheck_prompt` in `src/evaluation/evaluate_qa.py` of
//! xiaowu0162/LongMemEval (commits b11ff723381cf41e744c5524be0c52b3a408516c and
//! f466efe0ea8859251760733cd4c7ad98302b9ddf carry the same prompts): a single user message,
//! temperature 0, at most 10 new tokens, and the label is whether the stripped, lowercased reply
//! contains `yes`. Abstention questions (ids ending in `_abs`) get the unanswerable-question
//! prompt whatever their type.

use evicortex_reader::{ChatMessage, ChatRole, DecodingSettings, ReadError, Reader};

use crate::datasets::longmemeval::QuestionType;

/// Whether the question is one of LongMemEval's abstention questions.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Answerability {
    /// The history holds the answer.
    Answerable,
    /// The question id ends in `_abs`: the right response says the answer is not known.
    Abstention,
}

impl Answerability {
    /// From a question id, as the released code decides (`'_abs' in question_id`).
    pub fn of_question_id(question_id: &str) -> Answerability {
        if question_id.contains("_abs") {
            Answerability::Abstention
        } else {
            Answerability::Answerable
        }
    }
}

/// The decoding the released judge uses: greedy (temperature 0), at most 10 new tokens.
pub const JUDGE_DECODING: DecodingSettings = DecodingSettings::greedy(10);

/// The judge prompt `get_anscheck_prompt` builds.
pub fn longmemeval_judge_prompt(
    question_type: QuestionType,
    answerability: Answerability,
    question: &str,
    answer: &str,
    response: &str,
) -> String {
    let template = match (answerability, question_type) {
        (Answerability::Abstention, _) => ABSTENTION,
        (
            Answerability::Answerable,
            QuestionType::SingleSessionUser
            | QuestionType::SingleSessionAssistant
            | QuestionType::MultiSession,
        ) => SINGLE_OR_MULTI_SESSION,
        (Answerability::Answerable, QuestionType::TemporalReasoning) => TEMPORAL,
        (Answerability::Answerable, QuestionType::KnowledgeUpdate) => KNOWLEDGE_UPDATE,
        (Answerability::Answerable, QuestionType::SingleSessionPreference) => PREFERENCE,
    };
    py_format3(template, question, answer, response)
}

/// The judge's verdict on one response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JudgeVerdict {
    /// Whether the judge said yes.
    pub correct: bool,
    /// The judge's reply, verbatim.
    pub reply: String,
}

/// Asks `judge` whether `response` answers the question, exactly as the released evaluation
/// does.
pub fn longmemeval_judge(
    judge: &dyn Reader,
    question_type: QuestionType,
    answerability: Answerability,
    question: &str,
    answer: &str,
    response: &str,
) -> Result<JudgeVerdict, ReadError> {
    let prompt = longmemeval_judge_prompt(question_type, answerability, question, answer, response);
    let messages = [ChatMessage { role: ChatRole::User, content: prompt }];
    let output = judge.read(&messages, &JUDGE_DECODING)?;
    Ok(JudgeVerdict { correct: judge_label(&output.text), reply: output.text })
}

/// `'yes' in eval_response.strip().lower()`.
pub fn judge_label(reply: &str) -> bool {
    crate::answer_score::locomo::py_strip(reply).to_lowercase().contains("yes")
}

/// Python's `str.format` with three positional `{}` fields and no other braces.
fn py_format3(template: &str, a: &str, b: &str, c: &str) -> String {
    let mut out = String::with_capacity(template.len() + a.len() + b.len() + c.len());
    let mut values = [a, b, c].into_iter();
    let mut rest = template;
    while let Some(at) = rest.find("{}") {
        out.push_str(&rest[..at]);
        out.push_str(values.next().expect("templates have exactly three fields"));
        rest = &rest[at + 2..];
    }
    out.push_str(rest);
    out
}

const SINGLE_OR_MULTI_SESSION: &str = "I will give you a question, a correct answer, and a response from a model. Please answer yes if the response contains the correct answer. Otherwise, answer no. If the response is equivalent to the correct answer or contains all the intermediate steps to get the correct answer, you should also answer yes. If the response only contains a subset of the information required by the answer, answer no. \n\nQuestion: {}\n\nCorrect Answer: {}\n\nModel Response: {}\n\nIs the model response correct? Answer yes or no only.";

const TEMPORAL: &str = "I will give you a question, a correct answer, and a response from a model. Please answer yes if the response contains the correct answer. Otherwise, answer no. If the response is equivalent to the correct answer or contains all the intermediate steps to get the correct answer, you should also answer yes. If the response only contains a subset of the information required by the answer, answer no. In addition, do not penalize off-by-one errors for the number of days. If the question asks for the number of days/weeks/months, etc., and the model makes off-by-one errors (e.g., predicting 19 days when the answer is 18), the model's response is still correct. \n\nQuestion: {}\n\nCorrect Answer: {}\n\nModel Response: {}\n\nIs the model response correct? Answer yes or no only.";

const KNOWLEDGE_UPDATE: &str = "I will give you a question, a correct answer, and a response from a model. Please answer yes if the response contains the correct answer. Otherwise, answer no. If the response contains some previous information along with an updated answer, the response should be considered as correct as long as the updated answer is the required answer.\n\nQuestion: {}\n\nCorrect Answer: {}\n\nModel Response: {}\n\nIs the model response correct? Answer yes or no only.";

const PREFERENCE: &str = "I will give you a question, a rubric for desired personalized response, and a response from a model. Please answer yes if the response satisfies the desired response. Otherwise, answer no. The model does not need to reflect all the points in the rubric. The response is correct as long as it recalls and utilizes the user's personal information correctly.\n\nQuestion: {}\n\nRubric: {}\n\nModel Response: {}\n\nIs the model response correct? Answer yes or no only.";

const ABSTENTION: &str = "I will give you an unanswerable question, an explanation, and a response from a model. Please answer yes if the model correctly identifies the question as unanswerable. The model could say that the information is incomplete, or some other information is given but the asked information is not.\n\nQuestion: {}\n\nExplanation: {}\n\nModel Response: {}\n\nDoes the model correctly identify the question as unanswerable? Answer yes or no only.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_fill_the_three_fields_in_order() {
        let prompt = longmemeval_judge_prompt(
            QuestionType::KnowledgeUpdate,
            Answerability::Answerable,
            "Where do I live?",
            "Lisbon",
            "You live in Lisbon {}.",
        );
        assert!(prompt.starts_with("I will give you a question, a correct answer"));
        assert!(prompt.ends_with(
            "Question: Where do I live?\n\nCorrect Answer: Lisbon\n\nModel Response: You live in \
             Lisbon {}.\n\nIs the model response correct? Answer yes or no only."
        ));
        let abs = longmemeval_judge_prompt(
            QuestionType::TemporalReasoning,
            Answerability::of_question_id("gpt4_2655b836_abs"),
            "q",
            "a",
            "r",
        );
        assert!(abs.contains("Explanation: a\n\nModel Response: r"));
        assert_eq!(Answerability::of_question_id("e47becba"), Answerability::Answerable);
    }

    #[test]
    fn labels_follow_the_released_rule() {
        assert!(judge_label("  Yes."));
        assert!(judge_label("no, but yes"));
        assert!(!judge_label("No"));
        assert!(judge_label("Eyes")); // the released substring rule, kept as is
    }

    #[test]
    fn every_type_round_trips() {
        for name in [
            "single-session-user",
            "single-session-assistant",
            "single-session-preference",
            "multi-session",
            "temporal-reasoning",
            "knowledge-update",
        ] {
            assert_eq!(QuestionType::parse(name).unwrap().as_str(), name);
        }
        assert_eq!(QuestionType::parse("other"), None);
    }
}
