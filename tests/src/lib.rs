//! Shared test helpers live in the e2e binary.
