//! The chat-completions client's configuration (the client against the served router is the
//! server crate's test).

use std::time::Duration;

use evicortex_reader::{ChatCompletionsClient, ChatCompletionsConfig, ReadError};

#[test]
fn the_client_configuration_is_checked() {
    let err = ChatCompletionsClient::new(ChatCompletionsConfig {
        base_url: "localhost:8000/v1".to_owned(),
        model: "m".to_owned(),
        api_key: None,
        context_window: None,
        timeout: Duration::from_secs(1),
    })
    .unwrap_err();
    assert!(matches!(err, ReadError::Config { field: "EVICORTEX_READER_BASE_URL", .. }), "{err}");
}
