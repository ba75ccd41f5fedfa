//! What an action did, for the page it redirects to. The server keeps the message and the redirect
//! carries only a random key (`?done=<key>`): a link anyone can send never puts text of its own in the
//! banner, and an unknown or used key shows nothing.

use std::collections::VecDeque;
use std::sync::Mutex;

/// Messages kept until shown; beyond this many the oldest go (a redirect never followed).
const KEPT: usize = 256;

/// The messages of recent actions, by key.
#[derive(Debug, Default)]
pub(crate) struct Flashes {
    recent: Mutex<VecDeque<(String, String)>>,
}

impl Flashes {
    /// Keeps `message`: the key the redirect carries (16 random bytes, as hex).
    pub(crate) fn put(&self, message: String) -> String {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).expect("the operating system's random source");
        let key: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        if recent.len() >= KEPT {
            recent.pop_front();
        }
        recent.push_back((key.clone(), message));
        key
    }

    /// The message of `key`, once: `None` for a key the server did not make, or already shown.
    pub(crate) fn take(&self, key: &str) -> Option<String> {
        let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        let at = recent.iter().position(|(k, _)| k == key)?;
        recent.remove(at).map(|(_, message)| message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_is_shown_once_and_only_by_its_key() {
        let f = Flashes::default();
        let key = f.put("paused a".into());
        assert_eq!(f.take("paused a"), None);
        assert_eq!(f.take(&key), Some("paused a".into()));
        assert_eq!(f.take(&key), None);
        let first = f.put("first".into());
        for i in 0..KEPT {
            f.put(format!("{i}"));
        }
        assert_eq!(f.take(&first), None, "the oldest went");
    }
}
