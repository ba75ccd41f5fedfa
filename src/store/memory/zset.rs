//! A sorted set of ids by score, like a Redis zset: ordered by (score, id), with O(log n) lookup,
//! insert and removal by id.

use std::collections::{BTreeSet, HashMap};
use std::ops::Bound;

/// A member's place: (score, id).
pub(super) type Member = (i64, String);

/// Ids ordered by score (ms), ties broken by id (bytewise, as Redis does).
#[derive(Debug, Default)]
pub(super) struct ZSet {
    order: BTreeSet<(i64, String)>,
    scores: HashMap<String, i64>,
}

impl ZSet {
    /// The score of `id`, if it is a member.
    pub(super) fn score(&self, id: &str) -> Option<i64> {
        self.scores.get(id).copied()
    }

    pub(super) fn contains(&self, id: &str) -> bool {
        self.scores.contains_key(id)
    }

    /// Adds `id` or moves it to `score`.
    pub(super) fn insert(&mut self, id: &str, score: i64) {
        if let Some(old) = self.scores.insert(id.to_owned(), score) {
            self.order.remove(&(old, id.to_owned()));
        }
        self.order.insert((score, id.to_owned()));
    }

    /// Removes `id`, returning its score.
    pub(super) fn remove(&mut self, id: &str) -> Option<i64> {
        let score = self.scores.remove(id)?;
        self.order.remove(&(score, id.to_owned()));
        Some(score)
    }

    /// Removes and returns the first member (lowest score, then id).
    pub(super) fn pop_first(&mut self) -> Option<(i64, String)> {
        let (score, id) = self.order.pop_first()?;
        self.scores.remove(&id);
        Some((score, id))
    }

    /// The lowest score.
    pub(super) fn first_score(&self) -> Option<i64> {
        self.order.first().map(|(score, _)| *score)
    }

    pub(super) fn len(&self) -> usize {
        self.scores.len()
    }

    /// Members in ascending order.
    pub(super) fn iter(&self) -> impl DoubleEndedIterator<Item = (i64, &str)> {
        self.order.iter().map(|(score, id)| (*score, id.as_str()))
    }

    /// Members between two bounds on (score, id), ascending.
    pub(super) fn range(
        &self,
        bounds: (Bound<Member>, Bound<Member>),
    ) -> impl DoubleEndedIterator<Item = (i64, &str)> {
        self.order
            .range(bounds)
            .map(|(score, id)| (*score, id.as_str()))
    }

    /// Members with score <= `max`, ascending, owned (so the set can change while they are handled).
    pub(super) fn take_up_to(&self, max: i64, limit: usize) -> Vec<(i64, String)> {
        self.order
            .iter()
            .take_while(|(score, _)| *score <= max)
            .take(limit)
            .cloned()
            .collect()
    }

    /// How many members have score <= `max`.
    pub(super) fn count_up_to(&self, max: i64) -> usize {
        self.order
            .iter()
            .take_while(|(score, _)| *score <= max)
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_by_score_then_id_and_moves_members() {
        let mut z = ZSet::default();
        z.insert("b", 5);
        z.insert("a", 5);
        z.insert("c", 1);
        assert_eq!(
            z.iter().map(|(_, id)| id).collect::<Vec<_>>(),
            ["c", "a", "b"]
        );
        z.insert("c", 9);
        assert_eq!(z.len(), 3);
        assert_eq!(z.first_score(), Some(5));
        assert_eq!(
            z.take_up_to(5, 10),
            [(5, "a".to_owned()), (5, "b".to_owned())]
        );
        assert_eq!(z.take_up_to(9, 1).len(), 1);
        assert_eq!(z.count_up_to(8), 2);
        assert_eq!(z.remove("a"), Some(5));
        assert_eq!(z.remove("a"), None);
        assert!(!z.contains("a"));
        assert_eq!(z.score("c"), Some(9));
        assert_eq!(z.pop_first(), Some((5, "b".to_owned())));
        assert!(!z.contains("b"));
        assert_eq!(z.len(), 1);
    }
}
