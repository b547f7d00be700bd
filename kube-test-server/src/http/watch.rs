//! WATCH: newline-delimited JSON events, streamed in a chunked response.
//!
//! A watch first sends its backlog (current objects, or the retained changes since its
//! resourceVersion), then live changes from its queue in the hub, with a BOOKMARK every
//! bookmark interval when the client allows them. It ends when `timeoutSeconds` pass,
//! when the hub drops it, or, for a resourceVersion older than the history, right after
//! the apiserver's 410 Expired ERROR event (sent with HTTP 200, as the apiserver does).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::error::{ApiError, ApiResult};
use super::{Params, Target, flag, list::selection};
use crate::hub::{Backlog, Hub};
use crate::resource::ResourceType;
use crate::selector::Selection;
use crate::store::{Change, StoreError};
use crate::watch::{EventType, WatchStart, event_for};
use crate::wire;

pub fn watch(
    hub: Arc<Hub>,
    resource: &ResourceType,
    target: &Target,
    params: &Params,
) -> ApiResult {
    let selection = selection(target, params)?;
    let start = WatchStart::parse(
        params.resource_version.as_deref(),
        flag(params.send_initial_events.as_ref()),
    )
    .ok_or_else(|| ApiError::bad_request("resourceVersion: must be a number"))?;
    let mut stream = WatchStream {
        hub: hub.clone(),
        resource: resource.clone(),
        version: target.version.clone(),
        selection,
        pending: VecDeque::new(),
        live: None,
        next_bookmark: flag(params.allow_watch_bookmarks.as_ref())
            .then(|| Instant::now() + hub.bookmark_interval()),
        deadline: params
            .timeout_seconds
            .map(|seconds| Instant::now() + Duration::from_secs(seconds)),
    };
    match hub.open_watch(&resource.group_resource(), &stream.selection, start) {
        Ok(opened) => {
            stream.queue_backlog(opened.backlog, opened.revision, start);
            stream.live = Some(opened.live);
        }
        Err(expired @ StoreError::Expired { .. }) => {
            let status = wire::status(410, "Expired", &expired.to_string());
            stream
                .pending
                .push_back(wire::event_line(EventType::Error, &status));
        }
        Err(other) => return Err(other.into()),
    }
    let body = futures::stream::unfold(stream, |mut stream| async move {
        let line = stream.next_line().await?;
        Some((Ok::<_, Infallible>(line), stream))
    });
    Ok((
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        Body::from_stream(body),
    )
        .into_response())
}

struct WatchStream {
    hub: Arc<Hub>,
    resource: ResourceType,
    /// The version the client asked for: every object is served as that version.
    version: String,
    selection: Selection,
    /// Lines ready to send, in order.
    pending: VecDeque<Bytes>,
    /// `None` once the watch has nothing more to receive.
    live: Option<mpsc::Receiver<Arc<Change>>>,
    /// `None` when the client did not allow bookmarks.
    next_bookmark: Option<Instant>,
    deadline: Option<Instant>,
}

impl WatchStream {
    /// The next line to send, or `None` when the stream is over.
    async fn next_line(&mut self) -> Option<Bytes> {
        loop {
            if let Some(line) = self.pending.pop_front() {
                return Some(line);
            }
            let live = self.live.as_mut()?;
            let far = Instant::now() + Duration::from_secs(86_400);
            tokio::select! {
                biased;
                () = tokio::time::sleep_until(self.deadline.unwrap_or(far)) => return None,
                change = live.recv() => match change {
                    Some(change) => self.queue_change(&change),
                    None => return None,
                },
                () = tokio::time::sleep_until(self.next_bookmark.unwrap_or(far)),
                    if self.next_bookmark.is_some() => self.queue_bookmark(),
            }
        }
    }

    fn queue_backlog(&mut self, backlog: Backlog, revision: u64, start: WatchStart) {
        match backlog {
            Backlog::CurrentObjects(objects) => {
                for object in objects {
                    self.queue(EventType::Added, &object);
                }
            }
            Backlog::Changes(changes) => {
                for change in changes {
                    self.queue_change(&change);
                }
            }
        }
        if let WatchStart::Now {
            initial_events_end: true,
        } = start
        {
            let bookmark = wire::bookmark(&self.resource, &self.version, revision, true);
            self.pending
                .push_back(wire::event_line(EventType::Bookmark, &bookmark));
        }
    }

    fn queue_change(&mut self, change: &Change) {
        if let Some((event_type, object)) = event_for(&self.selection, change) {
            self.queue(event_type, &object);
        }
    }

    fn queue(&mut self, event_type: EventType, object: &serde_json::Value) {
        let served = wire::served_as(object, &self.resource, &self.version);
        self.pending
            .push_back(wire::event_line(event_type, &served));
    }

    /// Sends what is queued up to now, then a BOOKMARK at the current revision.
    fn queue_bookmark(&mut self) {
        let Some(live) = self.live.as_mut() else {
            return;
        };
        let (queued, revision) = self.hub.catch_up(live);
        for change in queued {
            self.queue_change(&change);
        }
        let bookmark = wire::bookmark(&self.resource, &self.version, revision, false);
        self.pending
            .push_back(wire::event_line(EventType::Bookmark, &bookmark));
        self.next_bookmark = Some(Instant::now() + self.hub.bookmark_interval());
    }
}
