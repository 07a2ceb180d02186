//! Starting the agent: bind the API's address, then serve it at once (standalone), or look the
//! node up and serve it — over HTTPS with auto-TLS — while heartbeating (`client.rs`).

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::task::JoinHandle;

use crate::agent::{Agent, serve_plain};
use crate::config::AgentConfig;

/// An agent started by [`RunningAgent::start`]: its API address and its task.
#[derive(Debug)]
pub struct RunningAgent {
    pub agent: Arc<Agent>,
    /// The address the command API listens on.
    pub address: SocketAddr,
    task: Option<JoinHandle<Result<(), crate::client::ClientError>>>,
}

impl RunningAgent {
    /// Binds the API's address, then serves it at once (standalone), or looks the node up
    /// and serves it — over HTTPS with auto-TLS — while heartbeating.
    pub async fn start(config: AgentConfig) -> std::io::Result<RunningAgent> {
        let listener = tokio::net::TcpListener::bind(config.listen).await?;
        let address = listener.local_addr()?;
        let agent = Agent::new(config);
        let router = crate::api::router(agent.clone());
        tracing::info!(%address, "agent API address bound");
        let task = if agent.config.standalone {
            let agent = agent.clone();
            tokio::spawn(async move {
                serve_plain(&agent, listener, router).await;
                Ok(())
            })
        } else {
            tokio::spawn(crate::client::run(agent.clone(), listener, router))
        };
        Ok(RunningAgent {
            agent,
            address,
            task: Some(task),
        })
    }

    /// Runs until the lookup gives up (an error), the agent is told to stop (rescue), or
    /// forever.
    pub async fn wait(mut self) -> Result<(), crate::client::ClientError> {
        match self.task.take() {
            Some(task) => task.await.unwrap_or(Ok(())),
            None => Ok(()),
        }
    }
}

impl Drop for RunningAgent {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}
