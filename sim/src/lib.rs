//! Seeded deterministic simulations of flechtwerk.
