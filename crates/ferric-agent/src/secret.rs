//! Comparing secrets (agent tokens, swarm secrets) without leaking, through timing, how many
//! leading bytes matched.

/// Whether `left` and `right` are equal, in a time that depends only on their lengths.
pub(crate) fn constant_time_eq(left: &[u8], right: &[u8]) -> bool {
    left.len() == right.len()
        && left
            .iter()
            .zip(right)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}
