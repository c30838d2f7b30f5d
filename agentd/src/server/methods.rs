//! Every method's handler, registered from the `proto` method table, and the single place
//! where session errors become protocol errors.

use super::Daemon;
use super::dispatch::Outbox;
use agentd_core::{LIVE_BUFFER, SharedEvent};
use agentd_proto::methods::{self as m, Method, Subscription};
use agentd_proto::{
    CloseResponse, DaemonEvent, DaemonInfo, DeleteResponse, ErrorData, ErrorKind, HistoryResponse,
    ListResponse, ReloadResponse, RestartKey, SessionEndReason, SessionState, ShutdownResponse,
    StreamEnd, StreamEndReason, StreamItem,
};
use jsonrpsee::core::server::{
    Extensions, Methods, PendingSubscriptionSink, RpcModule, SubscriptionMessage, SubscriptionSink,
};
use jsonrpsee::types::{ErrorObjectOwned, Params, error::INVALID_PARAMS_CODE};
use serde::Serialize;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;

/// How long a subscriber may leave a notification unread before it is dropped as lagged.
const SEND_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the final notification waits for a lagging subscriber to make room.
const END_TIMEOUT: Duration = Duration::from_secs(60);

fn app_error(
    kind: ErrorKind,
    message: String,
    session_id: Option<agentd_proto::SessionId>,
) -> ErrorObjectOwned {
    let data = ErrorData {
        kind,
        retryable: kind.is_retryable(),
        session_id,
        damaged: None,
        files: None,
        more_files: None,
    };
    ErrorObjectOwned::owned(kind.code(), message, Some(data))
}

/// The protocol error for a session error: its kind, code and data.
fn error_object(e: agentd_core::Error) -> ErrorObjectOwned {
    let message = e.to_string();
    match e {
        agentd_core::Error::NotFound(id) => {
            app_error(ErrorKind::SessionNotFound, message, Some(id))
        }
        agentd_core::Error::Busy(id) => app_error(ErrorKind::SessionBusy, message, Some(id)),
        agentd_core::Error::Closed(id) => app_error(ErrorKind::SessionClosed, message, Some(id)),
        agentd_core::Error::Damaged(damaged) => {
            let kind = ErrorKind::SessionDamaged;
            let data = ErrorData {
                kind,
                retryable: kind.is_retryable(),
                session_id: Some(damaged.session_id.clone()),
                damaged: Some(*damaged),
                files: None,
                more_files: None,
            };
            ErrorObjectOwned::owned(kind.code(), message, Some(data))
        }
        agentd_core::Error::InvalidConfig(_) => app_error(ErrorKind::InvalidConfig, message, None),
        agentd_core::Error::ProviderNotConfigured(_) => {
            app_error(ErrorKind::ProviderNotConfigured, message, None)
        }
        agentd_core::Error::ShuttingDown => app_error(ErrorKind::ShuttingDown, message, None),
        agentd_core::Error::Storage(_) => app_error(ErrorKind::StorageFailed, message, None),
        agentd_core::Error::Provider(_) => app_error(ErrorKind::ProviderFailed, message, None),
        agentd_core::Error::InvalidParams(_) => {
            ErrorObjectOwned::owned(INVALID_PARAMS_CODE, message, None::<()>)
        }
        agentd_core::Error::RequestNotFound(_) => {
            app_error(ErrorKind::RequestNotFound, message, None)
        }
        agentd_core::Error::Internal(_) => app_error(ErrorKind::Internal, message, None),
        agentd_core::Error::EnvironmentUnavailable(_) => {
            app_error(ErrorKind::EnvironmentUnavailable, message, None)
        }
        agentd_core::Error::FilesChanged { files, more } => {
            let kind = ErrorKind::FilesChanged;
            let data = ErrorData {
                kind,
                retryable: kind.is_retryable(),
                session_id: None,
                damaged: None,
                files: Some(files),
                more_files: (more > 0).then_some(more),
            };
            ErrorObjectOwned::owned(kind.code(), message, Some(data))
        }
    }
}

/// Parses the params object; absent params parse as `{}` so methods without required fields
/// can be called bare. The error names the field at fault.
fn parse<T: serde::de::DeserializeOwned>(params: &Params<'_>) -> Result<T, ErrorObjectOwned> {
    let raw = params.as_str().unwrap_or("{}");
    let mut de = serde_json::Deserializer::from_str(raw);
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        // The position is noise for a one-line params object.
        let message = e.inner().to_string();
        let message = message
            .rsplit_once(" at line ")
            .map_or(message.as_str(), |(m, _)| m);
        // Serde names a missing or unknown field itself; anything else gets the path.
        let message = if path == "." || message.contains("field `") {
            format!("invalid params: {message}")
        } else {
            format!("invalid params: `{path}`: {message}")
        };
        ErrorObjectOwned::owned(INVALID_PARAMS_CODE, message, None::<()>)
    })
}

/// A handler's task that ended without an answer: a panic (a bug), or a cancelled task when
/// the daemon stops.
/// Image data (base64) one `session/history` page carries at most, beyond its first entry:
/// with the rest of the entries it stays under the 64 MiB response cap.
const HISTORY_PAGE_IMAGE_BYTES: usize = 32 << 20;

/// Base64 bytes of the images `turn` carries.
fn image_data_len(turn: &agentd_proto::Turn) -> usize {
    use agentd_proto::Turn;
    let images = match turn {
        Turn::User { images, .. } | Turn::Steering { images, .. } => images.iter().collect(),
        Turn::ToolResults { results } => results.iter().flat_map(|r| &r.images).collect(),
        _ => Vec::new(),
    };
    images.iter().map(|i| i.data.len()).sum()
}

fn crashed(e: tokio::task::JoinError) -> agentd_core::Error {
    if e.is_panic() {
        agentd_core::Error::Internal("the request's handler crashed; the daemon goes on".into())
    } else {
        agentd_core::Error::ShuttingDown
    }
}

fn register<M, F, Fut>(module: &mut RpcModule<Daemon>, handler: F)
where
    M: Method,
    M::Response: Clone,
    F: Fn(Arc<Daemon>, M::Params) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<M::Response, agentd_core::Error>> + Send + 'static,
{
    let result = module.register_async_method(M::NAME, move |params, daemon, _| {
        let handler = handler.clone();
        async move {
            let params: M::Params = parse(&params)?;
            if daemon.shutdown.is_cancelled() {
                return Err(error_object(agentd_core::Error::ShuttingDown));
            }
            handler(daemon, params).await.map_err(error_object)
        }
    });
    if let Err(e) = result {
        tracing::error!("method {} registered twice: {e}", M::NAME);
    }
}

fn register_subscription<S, F, Fut>(module: &mut RpcModule<Daemon>, handler: F)
where
    S: Subscription,
    F: Fn(Arc<Daemon>, S::Params, PendingSubscriptionSink, Option<Outbox>) -> Fut
        + Clone
        + Send
        + Sync
        + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let result = module.register_subscription(
        S::NAME,
        S::NOTIFICATION,
        S::UNSUBSCRIBE,
        move |params, pending, daemon, extensions: Extensions| {
            let handler = handler.clone();
            let outbox = extensions.get::<Outbox>().cloned();
            async move {
                match parse::<S::Params>(&params) {
                    Ok(p) => handler(daemon, p, pending, outbox).await,
                    Err(e) => pending.reject(e).await,
                }
            }
        },
    );
    if let Err(e) = result {
        tracing::error!("subscription {} registered twice: {e}", S::NAME);
    }
}

/// Reloads the config for new sessions (`daemon/reload` and SIGHUP). A file that does not
/// load is refused with the words of `agentd --check-config`, and the config in use stays.
pub(crate) async fn reload(
    registry: &agentd_core::Registry,
) -> Result<(Arc<agentd_core::Config>, Vec<RestartKey>), agentd_core::Error> {
    match registry.reload().await {
        Ok((config, restart_needed)) => {
            tracing::info!(
                file = %config.file_to_edit(),
                "config reloaded; new sessions use it, running ones keep theirs"
            );
            for warning in &config.warnings {
                tracing::warn!("{warning}");
            }
            if !restart_needed.is_empty() {
                let keys: Vec<&str> = restart_needed.iter().map(|k| k.as_str()).collect();
                tracing::warn!(
                    "changed keys that apply only at the next start: {}",
                    keys.join(", ")
                );
            }
            Ok((config, restart_needed))
        }
        Err(e) => {
            let message = format!(
                "{e}; the daemon keeps the config it had (fix the file, then run \
                 `agentctl daemon reload` again)"
            );
            tracing::error!("reload refused: {message}");
            Err(agentd_core::Error::InvalidConfig(message))
        }
    }
}

/// Builds the method table.
pub(super) fn build(daemon: Arc<Daemon>) -> Methods {
    let mut module = RpcModule::from_arc(daemon);

    register::<m::DaemonInfoMethod, _, _>(&mut module, |d, _| async move {
        let (sessions, sessions_processing) = d.registry.counts();
        // As a new session would see it: with a key stored by `agentctl login` since. A bad
        // credentials file fails the next create with its reason; `--check-config` names it.
        let config = d.registry.config_with_credentials().await;
        Ok(DaemonInfo {
            version: env!("CARGO_PKG_VERSION").into(),
            protocol: agentd_proto::PROTOCOL_VERSION,
            pid: std::process::id(),
            uptime_ms: d.started.elapsed().as_millis() as u64,
            socket: d.socket.display().to_string(),
            sessions,
            sessions_processing,
            sessions_loaded: d.registry.loaded(),
            connections: d.connections.load(Ordering::Relaxed),
            providers: config
                .providers
                .values()
                .map(|p| p.info(config.started_by))
                .collect(),
            config_file: config.source.as_ref().map(|p| p.display().to_string()),
            state_dir: d.registry.store_dir().map(|p| p.display().to_string()),
            started_by: Some(config.started_by),
        })
    });
    register::<m::DaemonReload, _, _>(&mut module, |d, _| async move {
        let (config, restart_needed) = reload(&d.registry).await?;
        Ok(ReloadResponse {
            config_file: config.source.as_ref().map(|p| p.display().to_string()),
            providers: config
                .providers
                .values()
                .map(|p| p.info(config.started_by))
                .collect(),
            warnings: config.warnings.clone(),
            restart_needed,
        })
    });
    register::<m::DaemonShutdown, _, _>(&mut module, |d, _| async move {
        let (_, processing) = d.registry.counts();
        // The answer still goes out: a connection's writer drains every handler's reply
        // before it closes.
        d.shutdown.cancel();
        Ok(ShutdownResponse {
            aborted: processing,
        })
    });
    register::<m::SessionCreate, _, _>(&mut module, |d, p| async move {
        // Runs in its own task: a client that disconnects mid-call must not leave a half-made session.
        tokio::spawn(async move { d.registry.create(p).await.map(|s| s.snapshot()) })
            .await
            .map_err(crashed)?
    });
    register::<m::SessionList, _, _>(&mut module, |d, p| async move {
        let sessions = d
            .registry
            .summaries()
            .into_iter()
            .filter(|s| {
                p.state.is_none_or(|st| st == s.state) && p.cwd.as_ref().is_none_or(|c| *c == s.cwd)
            })
            .collect();
        // A damaged session's state and directory are unknown: no filter selects it.
        let damaged = if p.state.is_none() && p.cwd.is_none() {
            d.registry.damaged()
        } else {
            Vec::new()
        };
        Ok(ListResponse { sessions, damaged })
    });
    register::<m::SessionGet, _, _>(&mut module, |d, p| async move {
        Ok(d.registry.get(&p.session_id).await?.snapshot())
    });
    register::<m::SessionSubmit, _, _>(&mut module, |d, p| async move {
        d.registry
            .get(&p.session_id)
            .await?
            .submit(
                p.text,
                p.images,
                p.client_input_id,
                p.when_busy.unwrap_or_default(),
            )
            .await
    });
    register::<m::SessionSteer, _, _>(&mut module, |d, p| async move {
        d.registry
            .get(&p.session_id)
            .await?
            .steer(p.text, p.images)
            .await
    });
    register::<m::SessionFollowUp, _, _>(&mut module, |d, p| async move {
        d.registry
            .get(&p.session_id)
            .await?
            .follow_up(p.text, p.images)
            .await
    });
    register::<m::SessionCommands, _, _>(&mut module, |d, p| async move {
        Ok(d.registry.get(&p.session_id).await?.commands())
    });
    register::<m::SessionQueue, _, _>(&mut module, |d, p| async move {
        Ok(d.registry.get(&p.session_id).await?.queue())
    });
    register::<m::SessionQueueClear, _, _>(&mut module, |d, p| async move {
        d.registry.get(&p.session_id).await?.queue_clear().await
    });
    register::<m::SessionAbort, _, _>(&mut module, |d, p| async move {
        let session = d.registry.get(&p.session_id).await?;
        tokio::spawn(async move {
            let aborted = session.abort(p.close).await?;
            // The answer follows the events the abort caused on every stream.
            session.delivered(session.view().last_seq).await;
            Ok(aborted)
        })
        .await
        .map_err(crashed)?
    });
    register::<m::SessionClose, _, _>(&mut module, |d, p| async move {
        let session = d.registry.get(&p.session_id).await?;
        tokio::spawn(async move { session.close(SessionEndReason::ClosedByClient).await })
            .await
            .map_err(crashed)?;
        Ok(CloseResponse {
            state: SessionState::Closed,
        })
    });
    register::<m::SessionSetConfig, _, _>(&mut module, |d, p| async move {
        d.registry.set_config(&p.session_id, p.config).await
    });
    register::<m::SessionHistory, _, _>(&mut module, |d, p| async move {
        let session = d.registry.get(&p.session_id).await?;
        if let Some(input_id) = p.input_id {
            let entry = session
                .input_entry(input_id.clone())
                .await?
                .ok_or_else(|| {
                    agentd_core::Error::InvalidParams(format!(
                        "input_id: session {} has no input {input_id}",
                        p.session_id
                    ))
                })?;
            return Ok(HistoryResponse {
                entries: vec![(*entry).clone()],
                total: 1,
            });
        }
        let history = session.history().await?;
        let limit = p.limit.unwrap_or(100);
        // Images make entries large: a page stops before its images pass the bound, so it
        // stays under the response size cap.
        let mut image_bytes = 0;
        let entries = history
            .iter()
            .skip(p.offset)
            .take(limit)
            .take_while(|e| {
                let first = image_bytes == 0;
                image_bytes += image_data_len(&e.turn);
                first || image_bytes <= HISTORY_PAGE_IMAGE_BYTES
            })
            .map(|e| (**e).clone())
            .collect();
        Ok(HistoryResponse {
            entries,
            total: history.len(),
        })
    });
    register::<m::SessionFork, _, _>(&mut module, |d, p| async move {
        tokio::spawn(async move {
            d.registry
                .fork(&p.session_id, p.entry_id, p.title)
                .await
                .map(|s| s.snapshot())
        })
        .await
        .map_err(crashed)?
    });
    register::<m::SessionRollback, _, _>(&mut module, |d, p| async move {
        d.registry
            .get(&p.session_id)
            .await?
            .rollback(p.turns, p.files, p.force)
            .await
    });
    register::<m::SessionRedo, _, _>(&mut module, |d, p| async move {
        d.registry.get(&p.session_id).await?.redo(p.force).await
    });
    register::<m::SessionDiff, _, _>(&mut module, |d, p| async move {
        d.registry.get(&p.session_id).await?.diff(p.input_id).await
    });
    register::<m::SessionCompact, _, _>(&mut module, |d, p| async move {
        let session = d.registry.get(&p.session_id).await?;
        tokio::spawn(async move { session.compact().await })
            .await
            .map_err(crashed)?
    });
    register::<m::SessionRespond, _, _>(&mut module, |d, p| async move {
        d.registry.get(&p.session_id).await?.respond(p).await
    });
    register::<m::SessionDelete, _, _>(&mut module, |d, p| async move {
        tokio::spawn(async move {
            let worktree_kept = d.registry.delete(&p.session_id).await?;
            Ok(DeleteResponse {
                session_id: p.session_id,
                worktree_kept,
            })
        })
        .await
        .map_err(crashed)?
    });
    register_subscription::<m::SessionSubscribe, _, _>(&mut module, stream_session);
    register_subscription::<m::DaemonSubscribe, _, _>(&mut module, stream_daemon);
    module.into()
}

fn message<T: Serialize>(item: &T) -> Option<SubscriptionMessage> {
    serde_json::value::to_raw_value(item)
        .ok()
        .map(SubscriptionMessage::from)
}

/// Sends an item, dropping a subscriber that leaves it unread too long.
async fn send<T: Serialize>(sink: &SubscriptionSink, item: &T) -> Result<(), ()> {
    let msg = message(item).ok_or(())?;
    sink.send_timeout(msg, SEND_TIMEOUT).await.map_err(|_| ())
}

/// Sends an event, made from the JSON the session serialized once; drops a subscriber that
/// leaves it unread too long.
async fn send_event(sink: &SubscriptionSink, event: &SharedEvent) -> Result<(), ()> {
    let msg = serde_json::value::RawValue::from_string(event.stream_item_json())
        .map(SubscriptionMessage::from)
        .map_err(|_| ())?;
    sink.send_timeout(msg, SEND_TIMEOUT).await.map_err(|_| ())
}

/// Sends the final notification. A lagging subscriber may still have a full queue, so this
/// waits for room (bounded, in case the client is gone for good).
async fn end(sink: &SubscriptionSink, item: &impl Serialize) {
    if let Some(msg) = message(item) {
        let _ = sink.send_timeout(msg, END_TIMEOUT).await;
    }
}

/// The end of a session stream.
fn stream_end(
    session_id: &agentd_proto::SessionId,
    reason: StreamEndReason,
    last_seq: u64,
) -> StreamItem {
    StreamItem::End(StreamEnd {
        session_id: session_id.clone(),
        reason,
        last_seq,
    })
}

/// Sends the final notification of a subscription the client ended with `*/unsubscribe`:
/// jsonrpsee's sink no longer sends then, so it goes straight to the connection's queue.
/// When the connection itself is gone there is no one to tell, and this does nothing.
async fn end_unsubscribed(sink: &SubscriptionSink, outbox: Option<&Outbox>, item: &impl Serialize) {
    let Some(outbox) = outbox else {
        return;
    };
    let notification = serde_json::json!({
        "jsonrpc": "2.0",
        "method": sink.method_name(),
        "params": {"subscription": sink.subscription_id(), "result": item},
    });
    if let Ok(raw) = serde_json::value::to_raw_value(&notification) {
        let _ = outbox.send(raw, END_TIMEOUT).await;
    }
}

async fn stream_session(
    d: Arc<Daemon>,
    p: agentd_proto::SubscribeParams,
    pending: PendingSubscriptionSink,
    outbox: Option<Outbox>,
) {
    let subscribed = match d.registry.get(&p.session_id).await {
        Ok(session) => session.subscribe(p.since_seq).await.map(|s| (session, s)),
        Err(e) => Err(e),
    };
    let (session, subscription) = match subscribed {
        Ok(s) => s,
        Err(e) => return pending.reject(error_object(e)).await,
    };
    let accepted = match &outbox {
        Some(outbox) => outbox.accept(pending).await,
        None => pending.accept().await,
    };
    let Ok(sink) = accepted else {
        return;
    };
    let id = &p.session_id;
    let mut last_seq = p.since_seq.unwrap_or(0);
    let mut live = subscription.live;
    let delivered = subscription.delivered;
    for event in subscription.replay {
        if send_event(&sink, &event).await.is_err() {
            // `last_seq` is the last event delivered: the client resumes after it.
            return finish(
                &sink,
                outbox.as_ref(),
                id,
                StreamEndReason::Lagged,
                last_seq,
            )
            .await;
        }
        last_seq = event.seq;
        delivered.send_replace(last_seq);
    }
    if session.state() == SessionState::Closed && live.is_empty() {
        return end(
            &sink,
            &stream_end(id, StreamEndReason::SessionClosed, last_seq),
        )
        .await;
    }
    loop {
        let received = tokio::select! {
            biased;
            r = live.recv() => r,
            _ = sink.closed() => {
                let item = stream_end(id, StreamEndReason::Unsubscribed, last_seq);
                return end_unsubscribed(&sink, outbox.as_ref(), &item).await;
            }
            // Events the shutdown's aborts produce are delivered first (biased toward `live`).
            _ = d.streams_closed.cancelled() => {
                return end(&sink, &stream_end(id, StreamEndReason::DaemonShutdown, last_seq)).await;
            }
        };
        match received {
            Ok(event) if event.seq <= last_seq => continue,
            Ok(event) => {
                let closed = matches!(event.body, agentd_proto::EventBody::SessionEnd { .. });
                if send_event(&sink, &event).await.is_err() {
                    // `last_seq` is still the last event delivered: the client resumes after
                    // it and gets this one again.
                    return finish(
                        &sink,
                        outbox.as_ref(),
                        id,
                        StreamEndReason::Lagged,
                        last_seq,
                    )
                    .await;
                }
                last_seq = event.seq;
                delivered.send_replace(last_seq);
                if closed {
                    return end(
                        &sink,
                        &stream_end(id, StreamEndReason::SessionClosed, last_seq),
                    )
                    .await;
                }
            }
            Err(RecvError::Lagged(missed)) => {
                tracing::debug!(session = %p.session_id, missed, buffer = LIVE_BUFFER, "dropping a lagging subscriber");
                return end(&sink, &stream_end(id, StreamEndReason::Lagged, last_seq)).await;
            }
            // The session's task ended: it closed, or the daemon is stopping.
            Err(RecvError::Closed) => {
                let reason = if session.state() != SessionState::Closed && d.shutdown.is_cancelled()
                {
                    StreamEndReason::DaemonShutdown
                } else {
                    StreamEndReason::SessionClosed
                };
                return end(&sink, &stream_end(id, reason, last_seq)).await;
            }
        }
    }
}

/// Ends a stream whose send failed: because the client unsubscribed meanwhile (then the end
/// says so), or because it fell behind (`reason`).
async fn finish(
    sink: &SubscriptionSink,
    outbox: Option<&Outbox>,
    id: &agentd_proto::SessionId,
    reason: StreamEndReason,
    last_seq: u64,
) {
    if sink.is_closed() {
        let item = stream_end(id, StreamEndReason::Unsubscribed, last_seq);
        return end_unsubscribed(sink, outbox, &item).await;
    }
    end(sink, &stream_end(id, reason, last_seq)).await
}

async fn stream_daemon(
    d: Arc<Daemon>,
    _: agentd_proto::Empty,
    pending: PendingSubscriptionSink,
    outbox: Option<Outbox>,
) {
    let mut events = d.registry.daemon_events();
    let accepted = match &outbox {
        Some(outbox) => outbox.accept(pending).await,
        None => pending.accept().await,
    };
    let Ok(sink) = accepted else {
        return;
    };
    loop {
        let received = tokio::select! {
            r = events.recv() => r,
            _ = sink.closed() => {
                return end_unsubscribed(&sink, outbox.as_ref(), &DaemonEvent::Unsubscribed {}).await;
            }
            _ = d.streams_closed.cancelled() => {
                return end(&sink, &DaemonEvent::Shutdown {}).await;
            }
        };
        let item = match received {
            Ok(e) => e,
            Err(RecvError::Lagged(_)) => DaemonEvent::Lagged {},
            Err(RecvError::Closed) => DaemonEvent::Shutdown {},
        };
        // Only the terminal kinds end the stream; every session event (created, deleted,
        // state changed) is followed by more.
        if item.is_final() {
            return end(&sink, &item).await;
        }
        if send(&sink, &item).await.is_err() {
            if sink.is_closed() {
                return end_unsubscribed(&sink, outbox.as_ref(), &DaemonEvent::Unsubscribed {})
                    .await;
            }
            return end(&sink, &DaemonEvent::Lagged {}).await;
        }
    }
}

/// The error a connection from another user gets.
pub(super) fn unauthorized() -> ErrorObjectOwned {
    app_error(
        ErrorKind::Unauthorized,
        "permission denied: the daemon serves only its own user (and root)".into(),
        None,
    )
}

/// The error a process the daemon started (a tool command, or anything it ran) gets when it
/// connects.
pub(super) fn started_by_daemon() -> ErrorObjectOwned {
    app_error(
        ErrorKind::Unauthorized,
        "permission denied: agentd does not accept connections from processes it started \
         (tool commands and whatever they run), so a command cannot control agentd or its \
         sessions"
            .into(),
        None,
    )
}

/// The error a client gets when the daemon cannot tell whether it started it.
pub(super) fn unverified_peer(why: &str) -> ErrorObjectOwned {
    app_error(
        ErrorKind::Unauthorized,
        format!(
            "permission denied: agentd could not verify the connecting process ({why}); it \
             accepts only processes it did not start"
        ),
        None,
    )
}

/// The error a client beyond the connection limit gets.
pub(super) fn too_many_connections(max: usize) -> ErrorObjectOwned {
    app_error(
        ErrorKind::Overloaded,
        format!("too many connections (the limit is {max}); close idle ones or retry later"),
        None,
    )
}

/// The error a message gets when the daemon already holds `max` bytes of unhandled input.
pub(super) fn input_overloaded(max: usize) -> ErrorObjectOwned {
    app_error(
        ErrorKind::Overloaded,
        format!(
            "the daemon is holding its limit of {} MiB of unhandled requests; retry later",
            max >> 20
        ),
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_crashed_handler_is_an_internal_error_not_a_shutdown() {
        let panicked = tokio::spawn(async { panic!("a bug") }).await.unwrap_err();
        assert!(matches!(crashed(panicked), agentd_core::Error::Internal(_)));
        let task = tokio::spawn(std::future::pending::<()>());
        task.abort();
        assert_eq!(
            crashed(task.await.unwrap_err()),
            agentd_core::Error::ShuttingDown
        );
    }
}
