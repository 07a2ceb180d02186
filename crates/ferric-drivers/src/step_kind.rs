//! Which list of steps a flow runs: cleaning, deploying or servicing. On its own so that the
//! driver errors (`error.rs`) can name it without depending on the interfaces (`interfaces.rs`,
//! which re-exports it), which depend on the errors.

/// Which list of steps: cleaning, deploying or servicing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StepKind {
    Clean,
    Deploy,
    Service,
}

impl StepKind {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Clean => "clean",
            Self::Deploy => "deploy",
            Self::Service => "service",
        }
    }
}
