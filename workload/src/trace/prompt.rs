//! The prompt text of a recorded (redacted) request body, as a scenario's
//! `data: { NAME: { trace: FILE, field: F } }` takes it: of a chat body its
//! user messages, of a completion body its `prompt`.

use serde_json::Value;

/// Which text of a body is the prompt (`field:`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PromptField {
    /// The last `user` message of a chat body (the turn's new question);
    /// a completion body's `prompt`.
    #[default]
    LastUser,
    /// Every `user` message of a chat body, joined by a blank line (the
    /// conversation's user side); a completion body's `prompt`.
    AllUser,
    /// A completion body's `prompt` alone (a chat body gives none).
    Prompt,
}

impl PromptField {
    pub const ALL: [PromptField; 3] = [
        PromptField::LastUser,
        PromptField::AllUser,
        PromptField::Prompt,
    ];

    pub fn name(self) -> &'static str {
        match self {
            PromptField::LastUser => "last_user",
            PromptField::AllUser => "all_user",
            PromptField::Prompt => "prompt",
        }
    }

    pub fn from_name(name: &str) -> Result<PromptField, String> {
        PromptField::ALL
            .into_iter()
            .find(|f| f.name() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = PromptField::ALL.iter().map(|f| f.name()).collect();
                format!("must be one of {}, found `{name}`", names.join(", "))
            })
    }

    /// What a body must hold to give a value, for errors: `a chat or
    /// completion body with a user prompt`.
    pub fn wants(self) -> &'static str {
        match self {
            PromptField::LastUser | PromptField::AllUser => {
                "a chat or completion body with a user prompt"
            }
            PromptField::Prompt => "a completion body with a `prompt`",
        }
    }
}

/// The prompt `field` takes from `body`, or `None` when the body has none
/// (or only whitespace).
pub fn prompt_of(body: &Value, field: PromptField) -> Option<String> {
    let text = match (body.get("messages").and_then(Value::as_array), field) {
        (Some(_), PromptField::Prompt) => None,
        (Some(messages), PromptField::LastUser) => messages
            .iter()
            .rev()
            .find(|m| is_user(m))
            .and_then(content_text),
        (Some(messages), PromptField::AllUser) => {
            let texts: Vec<String> = messages
                .iter()
                .filter(|m| is_user(m))
                .filter_map(content_text)
                .filter(|t| !t.trim().is_empty())
                .collect();
            (!texts.is_empty()).then(|| texts.join("\n\n"))
        }
        (None, _) => body
            .get("prompt")
            .and_then(Value::as_str)
            .map(str::to_owned),
    };
    text.filter(|t| !t.trim().is_empty())
}

fn is_user(message: &Value) -> bool {
    message.get("role").and_then(Value::as_str) == Some("user")
}

/// A message's text: its `content` string, or its text parts joined by a
/// newline (image and audio parts have none).
fn content_text(message: &Value) -> Option<String> {
    match message.get("content")? {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => Some(
            parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        _ => None,
    }
}
