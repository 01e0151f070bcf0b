//! A client's request head must arrive whole within 30 s of its connection waiting for it, on
//! either HTTP/1 engine: a connection that sends part of a head and stops is closed unanswered
//! (hyper's server, `--http1-engine hyper`, and the fast engine alike), and on a kept-alive
//! connection the 30 s start again with each wait (the fast engine keeps one timer per
//! connection and sets it again for each head, as hyper's server does; a timer left at its
//! first deadline would close the connection early). Run on tokio's paused clock: the 30 s
//! pass as soon as nothing else is left to do, so the test takes no real time; the backend and
//! the sidecar run on the test's runtime, so nothing is waited for on another thread.

mod support;

use std::time::Duration;

use rollcall_dataplane::pool::{Http1Engine, Tuning};
use rollcall_dataplane::sidecar::RunOptions;
use support::backends::Recorder;
use support::raw::answer_length;
use support::{Harness, config};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

const HEAD_TIMEOUT: Duration = Duration::from_secs(30);

/// A sidecar on `engine` in front of one recording backend, and a client connected to it.
async fn connected(engine: Http1Engine) -> (Harness, Recorder, TcpStream) {
    let backend = Recorder::spawn("a", 200, Duration::ZERO).await;
    let run = RunOptions {
        tuning: Tuning {
            http1_engine: engine,
            ..Tuning::default()
        },
        ..RunOptions::default()
    };
    let yaml = config(&[backend.addr()], "{healthCheck: {type: None}}");
    let harness = Harness::start_exactly(&yaml, run).await;
    let client = TcpStream::connect(harness.listen("web").await)
        .await
        .expect("connect");
    (harness, backend, client)
}

/// Send part of a head, then read until the peer closes: how long after `since` it did, and
/// what it sent first.
async fn part_of_a_head_until_closed(
    client: &mut TcpStream,
    part: &[u8],
    since: Instant,
) -> (Duration, Vec<u8>) {
    client.write_all(part).await.expect("send part of a head");
    let mut read = Vec::new();
    // A reset counts as a close too: what matters is when, and that nothing was answered. A
    // connection never closed fails the test (the paused clock would otherwise run on forever).
    let closed = tokio::time::timeout(2 * HEAD_TIMEOUT, client.read_to_end(&mut read)).await;
    assert!(
        closed.is_ok(),
        "not closed within {:?}: {read:?}",
        2 * HEAD_TIMEOUT
    );
    (since.elapsed(), read)
}

/// Send `request` and read its whole answer off a kept-alive connection.
async fn one_answer(client: &mut TcpStream, request: &[u8]) -> String {
    client.write_all(request).await.expect("send a request");
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while answer_length(&got, request).is_none() {
        let n = client.read(&mut buf).await.expect("read the answer");
        assert!(n > 0, "the connection closed before its answer: {got:?}");
        got.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&got).into_owned()
}

fn assert_closed_at_the_timeout(engine: Http1Engine, what: &str, after: Duration, sent: &[u8]) {
    assert!(
        sent.is_empty(),
        "{engine:?}, {what}: closed unanswered, got {:?}",
        String::from_utf8_lossy(sent)
    );
    assert!(
        after >= HEAD_TIMEOUT && after < HEAD_TIMEOUT + Duration::from_secs(1),
        "{engine:?}, {what}: closed {after:?} after the wait began, not 30 s"
    );
}

#[tokio::test(start_paused = true)]
async fn part_of_a_head_and_then_nothing_is_closed_unanswered_after_30s() {
    for engine in [Http1Engine::Hyper, Http1Engine::Fast] {
        let (_harness, _backend, mut client) = connected(engine).await;
        let start = Instant::now();
        let (after, sent) =
            part_of_a_head_until_closed(&mut client, b"GET / HTTP/1.1\r\nHost: x\r\n", start).await;
        assert_closed_at_the_timeout(engine, "a fresh connection", after, &sent);
    }
}

#[tokio::test(start_paused = true)]
async fn each_wait_for_a_head_on_a_kept_alive_connection_gets_its_own_30s() {
    for engine in [Http1Engine::Hyper, Http1Engine::Fast] {
        let (_harness, backend, mut client) = connected(engine).await;
        // The first wait lasts 25 s, then a whole request comes and is answered.
        tokio::time::sleep(Duration::from_secs(25)).await;
        let answer = one_answer(&mut client, b"GET /first HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(
            answer.starts_with("HTTP/1.1 200"),
            "{engine:?}: the first request is answered: {answer:?}"
        );
        assert_eq!(backend.arrivals().len(), 1);
        // The second wait starts now: 30 s from here, not from the first wait's start.
        let second_wait = Instant::now();
        let (after, sent) =
            part_of_a_head_until_closed(&mut client, b"GET /second HTTP/1.1\r\n", second_wait)
                .await;
        assert_closed_at_the_timeout(engine, "the second head", after, &sent);
        assert_eq!(
            backend.arrivals().len(),
            1,
            "{engine:?}: the part never reached it"
        );
    }
}
