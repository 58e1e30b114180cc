//! The chat-completions router serving the real smallest reader on loopback, read through the
//! reader crate's client: the same reply as a local read, and refusals by name.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use evicortex_reader::{
    AnswerRequest, ChatCompletionsClient, ChatCompletionsConfig, ChatMessage, DecodingSettings,
    FinishReason, ReadError, Reader, ReaderIdentity, answer, build_answer_prompt,
};
use evicortex_server::{RequestQueues, ServerConfig, chat_completions_router};

use crate::answer::reader as test_reader;

/// The router serving the test model on 127.0.0.1, stopped when dropped.
struct Served {
    addr: SocketAddr,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Served {
    fn start() -> Served {
        let reader: Arc<dyn Reader> = test_reader();
        let queues = RequestQueues::new(&ServerConfig::default());
        let router = chat_completions_router("smollm2", reader, queues);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        let (shutdown, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            runtime.block_on(async move {
                axum::serve(listener, router)
                    .with_graceful_shutdown(async {
                        let _ = stopped.await;
                    })
                    .await
                    .unwrap();
            });
        });
        Served { addr, shutdown: Some(shutdown), thread: Some(thread) }
    }

    fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    fn client(&self, model: &str) -> ChatCompletionsClient {
        ChatCompletionsClient::new(ChatCompletionsConfig {
            base_url: self.base_url(),
            model: model.to_owned(),
            api_key: Some("unused-by-this-server".to_owned()),
            context_window: None,
            timeout: Duration::from_secs(120),
        })
        .unwrap()
    }

    fn post(&self, body: serde_json::Value) -> (u16, serde_json::Value) {
        let response = reqwest::blocking::Client::new()
            .post(format!("{}/chat/completions", self.base_url()))
            .json(&body)
            .send()
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().unwrap())
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            thread.join().unwrap();
        }
    }
}

#[test]
fn the_client_reads_through_the_served_local_reader() {
    let served = Served::start();
    let client = served.client("smollm2");
    let messages = [
        ChatMessage::system("You are a helpful assistant. Answer briefly."),
        ChatMessage::user("What is the capital of France?"),
    ];
    let decoding = DecodingSettings::greedy(16);
    let remote = client.read(&messages, &decoding).unwrap();
    let local = test_reader().read(&messages, &decoding).unwrap();
    assert_eq!(remote.text, local.text);
    assert_eq!(remote.prompt_tokens, local.prompt_tokens);
    assert_eq!(remote.generated_tokens, local.generated_tokens);
    assert_eq!(remote.finish, FinishReason::Stop);

    let prompt = build_answer_prompt(&AnswerRequest {
        question: "Where did I move?",
        context: "Evidence from memory, oldest first. Cite as [#record].\n\nSession s1 \
                  (2024-05-02):\n[#12] 10:00 user: I moved to Lisbon in May.\n",
        question_date: None,
    });
    let reply = answer(&client, &prompt, &DecodingSettings::greedy(4)).unwrap();
    assert_eq!(
        reply.reader,
        ReaderIdentity::ChatCompletions { base_url: served.base_url(), model: "smollm2".into() }
    );
    assert_eq!(reply.generated_tokens, 4);
    assert_eq!(reply.finish, FinishReason::Length);
}

#[test]
fn the_server_refuses_what_it_does_not_serve_by_name() {
    let served = Served::start();
    let err =
        served.client("gpt-4o").read(&[ChatMessage::user("hi")], &DecodingSettings::greedy(2));
    assert!(matches!(err, Err(ReadError::Remote { status: 404, .. })), "{err:?}");

    let long = "word ".repeat(9000);
    let err =
        served.client("smollm2").read(&[ChatMessage::user(long)], &DecodingSettings::greedy(2));
    match err {
        Err(ReadError::Remote { status: 400, message, .. }) => {
            assert!(message.contains("exceeds the reader's context window of 8192"), "{message}")
        }
        other => panic!("expected a 400 for the window, got {other:?}"),
    }

    let message = serde_json::json!([{"role": "user", "content": "hi"}]);
    for (body, param) in [
        (serde_json::json!({"model": "smollm2", "messages": message, "stream": true}), "stream"),
        (
            serde_json::json!({"model": "smollm2", "messages": message, "temperature": 0.7}),
            "temperature",
        ),
        (serde_json::json!({"model": "smollm2", "messages": message, "n": 2}), "n"),
    ] {
        let (status, reply) = served.post(body);
        assert_eq!(status, 400, "{reply}");
        assert_eq!(reply["error"]["param"], param, "{reply}");
    }
    let (status, reply) = served
        .post(serde_json::json!({"model": "smollm2", "messages": message, "logit_bias": {"1": 5}}));
    assert_eq!(status, 400, "{reply}");
    assert!(reply["error"]["message"].as_str().unwrap().contains("logit_bias"), "{reply}");

    let (status, reply) =
        served.post(serde_json::json!({"model": "smollm2", "messages": message, "max_tokens": 2}));
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["usage"]["completion_tokens"], 2, "{reply}");
    assert_eq!(reply["system_fingerprint"], test_reader().identity().digest(), "{reply}");
}
