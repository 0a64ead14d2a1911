//! The words the log, the loop and the editor share: part kinds and statuses, session
//! statuses and how a turn ended. Stored as their snake_case names (`as_str`); a name this
//! version does not know (written by a newer one) reads as `Other`.

use serde::{Deserialize, Serialize};

macro_rules! vocabulary {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
        #[serde(rename_all = "snake_case")]
        pub enum $name {
            $($(#[$vdoc])* $variant,)+
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }

            pub fn parse(text: &str) -> Option<Self> {
                match text {
                    $($text => Some($name::$variant),)+
                    _ => None,
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl rusqlite::types::ToSql for $name {
            fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
                Ok(self.as_str().into())
            }
        }

        impl rusqlite::types::FromSql for $name {
            fn column_result(v: rusqlite::types::ValueRef<'_>) -> rusqlite::types::FromSqlResult<Self> {
                let text = v.as_str()?;
                Self::parse(text).ok_or_else(|| {
                    rusqlite::types::FromSqlError::Other(
                        format!("unknown {} {text:?}", stringify!($name)).into(),
                    )
                })
            }
        }

        impl PartialEq<$name> for String {
            fn eq(&self, other: &$name) -> bool {
                self == other.as_str()
            }
        }
    };
}

vocabulary! {
    /// What a message part holds.
    PartKind {
        Text = "text",
        Reasoning = "reasoning",
        /// A tool call and, once it ran, its result.
        Tool = "tool",
        /// The snapshot a step started from.
        StepStart = "step_start",
        /// The files a step changed (from and to snapshot).
        Patch = "patch",
        /// Context beside the user's words: a selection, a changed instruction file.
        Note = "note",
        /// Token counts the provider reported for one answer.
        Usage = "usage",
        /// Why an answer failed.
        Error = "error",
    }
}

vocabulary! {
    /// Where a part stands: text and reasoning stream, tools go pending → running → done.
    PartStatus {
        Streaming = "streaming",
        Pending = "pending",
        Running = "running",
        Completed = "completed",
        Error = "error",
        /// Cut off: by a cancel, a broken stream, or a server that stopped.
        Interrupted = "interrupted",
    }
}

vocabulary! {
    /// What a session is doing.
    SessionStatus {
        Idle = "idle",
        Busy = "busy",
        /// Waiting for the user (a permission ask).
        Waiting = "waiting",
    }
}

vocabulary! {
    /// How a turn ended.
    TurnEnd {
        /// The model stopped calling tools.
        EndTurn = "end_turn",
        MaxSteps = "max_steps",
        /// The answer reached the output limit: its text is cut off.
        MaxTokens = "max_tokens",
        /// The provider stopped the answer as a refusal.
        Refusal = "refusal",
        Cancelled = "cancelled",
        Error = "error",
    }
}

vocabulary! {
    /// How a memory fact is shown.
    Tier {
        /// Always shown, in reserved slots.
        Core = "core",
        /// Shown when a prompt is about it.
        Archival = "archival",
        /// Like archival, until it expires.
        Temporary = "temporary",
        /// Like archival, and it never decays.
        Pinned = "pinned",
    }
}

vocabulary! {
    /// Where a memory fact holds.
    FactScope {
        Project = "project",
        Global = "global",
    }
}

vocabulary! {
    /// Who may see a memory fact.
    Sensitivity {
        Normal = "normal",
        /// Only the user (CLI, inspector): never shown to the model again.
        #[serde(rename = "local-only")]
        LocalOnly = "local-only",
    }
}

vocabulary! {
    /// Who wrote a memory fact.
    FactSource {
        User = "user",
        Model = "model",
        /// Extracted by a dream.
        Dream = "dream",
    }
}

vocabulary! {
    /// What a long-term knowledge entry is.
    KnowledgeKind {
        /// How things are done here (a convention, an idiom).
        Pattern = "pattern",
        /// A choice that was made, and why.
        Decision = "decision",
        /// A trap: what breaks, and how to avoid it.
        Gotcha = "gotcha",
        Fact = "fact",
    }
}

vocabulary! {
    /// Who wrote a long-term knowledge entry.
    KnowledgeSource {
        User = "user",
        /// Extracted by the curator from a session.
        Curator = "curator",
        /// Read back from the managed section of the agents file, where a person wrote it.
        Import = "import",
        /// The curator's merge of several entries.
        Consolidation = "consolidation",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_match_serde() {
        for k in PartKind::ALL {
            assert_eq!(PartKind::parse(k.as_str()), Some(*k));
            assert_eq!(serde_json::to_value(k).unwrap(), k.as_str());
        }
        for s in PartStatus::ALL {
            assert_eq!(PartStatus::parse(s.as_str()), Some(*s));
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
        for s in SessionStatus::ALL {
            assert_eq!(SessionStatus::parse(s.as_str()), Some(*s));
        }
        for e in TurnEnd::ALL {
            assert_eq!(serde_json::to_value(e).unwrap(), e.as_str());
        }
        macro_rules! serde_matches {
            ($($t:ty),*) => {$(
                for v in <$t>::ALL {
                    assert_eq!(<$t>::parse(v.as_str()), Some(*v));
                    assert_eq!(serde_json::to_value(v).unwrap(), v.as_str());
                }
            )*};
        }
        serde_matches!(
            Tier,
            FactScope,
            Sensitivity,
            FactSource,
            KnowledgeKind,
            KnowledgeSource
        );
        assert_eq!(PartKind::parse("hologram"), None);
    }
}
