//! The connection to agentd: jsonrpsee's client core over newline-delimited JSON on the Unix
//! socket, and typed calls through the `proto` method table.

use agentd_proto::methods::{Method, Subscription};
use jsonrpsee::async_client::{Client, ClientBuilder};
use jsonrpsee::core::client::{
    ClientT, ReceivedMessage, SubscriptionClientT, TransportReceiverT, TransportSenderT,
};
use jsonrpsee::core::traits::ToRpcParams;
use serde::Serialize;
use serde_json::value::RawValue;
use std::io;
use std::path::Path;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

struct Sender(BufWriter<OwnedWriteHalf>);

impl TransportSenderT for Sender {
    type Error = io::Error;

    async fn send(&mut self, msg: String) -> io::Result<()> {
        self.0.write_all(msg.as_bytes()).await?;
        self.0.write_all(b"\n").await?;
        self.0.flush().await
    }
}

struct Receiver(BufReader<OwnedReadHalf>, String);

impl TransportReceiverT for Receiver {
    type Error = io::Error;

    async fn receive(&mut self) -> io::Result<ReceivedMessage> {
        self.1.clear();
        if self.0.read_line(&mut self.1).await? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        Ok(ReceivedMessage::Text(std::mem::take(&mut self.1)))
    }
}

/// Sends a params struct as the `params` object itself.
struct Object<T>(T);

impl<T: Serialize> ToRpcParams for Object<T> {
    fn to_rpc_params(self) -> Result<Option<Box<RawValue>>, serde_json::Error> {
        serde_json::value::to_raw_value(&self.0).map(Some)
    }
}

/// A connected client; clones share the connection (`agentctl acp` calls from many tasks).
#[derive(Clone)]
pub(crate) struct Connection {
    client: std::sync::Arc<Client>,
}

/// Why no connection was made.
pub(crate) enum ConnectError {
    /// Nothing could be reached (or the socket is not there).
    Io(io::Error),
    /// Something answered that is not this user's daemon: nothing was sent to it.
    Untrusted(String),
}

impl Connection {
    /// Connects to the daemon's socket and, before sending anything, checks that the process
    /// serving it runs as this user (`SO_PEERCRED`): another user's process there would read
    /// every prompt and could answer anything.
    pub(crate) async fn connect(socket: &Path) -> Result<Self, ConnectError> {
        let stream = UnixStream::connect(socket)
            .await
            .map_err(ConnectError::Io)?;
        let server = stream.peer_cred().map_err(ConnectError::Io)?.uid();
        let me = nix::unistd::geteuid().as_raw();
        if server != me {
            return Err(ConnectError::Untrusted(format!(
                "the process serving {} runs as uid {server}, not as you (uid {me}): it is not \
                 your agentd, so nothing was sent to it; stop it, or use another socket \
                 (--socket or AGENTD_SOCKET)",
                socket.display()
            )));
        }
        let (read, write) = stream.into_split();
        let client = ClientBuilder::default()
            // Subscriptions replay whole logs; the default 1024 would drop long ones.
            .max_buffer_capacity_per_subscription(1 << 16)
            .request_timeout(Duration::from_secs(120))
            .build_with_tokio(
                Sender(BufWriter::new(write)),
                Receiver(BufReader::new(read), String::new()),
            );
        Ok(Self {
            client: std::sync::Arc::new(client),
        })
    }

    /// Whether the daemon is still connected (it may have stopped since).
    pub(crate) fn is_connected(&self) -> bool {
        self.client.is_connected()
    }

    /// Calls method `M`.
    pub(crate) async fn call<M: Method>(
        &self,
        params: M::Params,
    ) -> Result<M::Response, jsonrpsee::core::ClientError> {
        self.client.request(M::NAME, Object(params)).await
    }

    /// Opens subscription `S`.
    pub(crate) async fn subscribe<S: Subscription>(
        &self,
        params: S::Params,
    ) -> Result<jsonrpsee::core::client::Subscription<S::Item>, jsonrpsee::core::ClientError> {
        self.client
            .subscribe(S::NAME, Object(params), S::UNSUBSCRIBE)
            .await
    }
}
