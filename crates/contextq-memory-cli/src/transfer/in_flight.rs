//! An import's writes in flight across its windows: [`Queue`] keeps tasks (a chunk of files to
//! create) and marks (where a window ends) in order, runs the first few tasks at once, and runs
//! other work (walking and listing the next window, the careful path of a window's files the
//! store may hold) while they are written, so that the store is not left idle at each window's
//! boundary (docs/benchmarks.md, "Import at scale").

use std::collections::VecDeque;
use std::future::{Future, poll_fn};
use std::pin::pin;
use std::task::Poll;

use futures::future::{LocalBoxFuture, MaybeDone};

/// Tasks and marks in order; the first `limit` tasks are run (polled) whenever the queue is
/// driven, the others wait, unpolled: a task holds nothing but its arguments until it starts.
pub(super) struct Queue<'t, T, M> {
    items: VecDeque<Item<'t, T, M>>,
    limit: usize,
}

enum Item<'t, T, M> {
    Task(MaybeDone<LocalBoxFuture<'t, T>>),
    Mark(M),
}

/// What [`Queue::next`] took from the front.
pub(super) enum Next<T, M> {
    /// A task's output.
    Done(T),
    /// A mark.
    Mark(M),
}

impl<'t, T, M> Queue<'t, T, M> {
    /// An empty queue that runs `limit` (at least 1) tasks at once.
    pub(super) fn new(limit: usize) -> Self {
        Queue {
            items: VecDeque::new(),
            limit: limit.max(1),
        }
    }

    /// Adds a task at the end.
    pub(super) fn push_task(&mut self, task: LocalBoxFuture<'t, T>) {
        self.items.push_back(Item::Task(MaybeDone::Future(task)));
    }

    /// Adds a mark at the end.
    pub(super) fn push_mark(&mut self, mark: M) {
        self.items.push_back(Item::Mark(mark));
    }

    /// Marks queued that `counts` says count.
    pub(super) fn marks(&self, counts: impl Fn(&M) -> bool) -> usize {
        self.items
            .iter()
            .filter(|i| matches!(i, Item::Mark(m) if counts(m)))
            .count()
    }

    /// Polls the first `limit` tasks (those done stay done, holding their output).
    fn poll_running(&mut self, cx: &mut std::task::Context<'_>) {
        for item in self
            .items
            .iter_mut()
            .filter_map(|i| match i {
                Item::Task(t) => Some(t),
                Item::Mark(_) => None,
            })
            .take(self.limit)
        {
            let _ = std::pin::Pin::new(item).poll(cx);
        }
    }

    /// Runs `work` to its end while the running tasks are written.
    pub(super) async fn drive<O>(&mut self, work: impl Future<Output = O>) -> O {
        let mut work = pin!(work);
        poll_fn(|cx| {
            self.poll_running(cx);
            work.as_mut().poll(cx)
        })
        .await
    }

    /// The front of the queue: a mark at once, a task when it is done (the others running
    /// meanwhile); `None` when the queue is empty.
    pub(super) async fn next(&mut self) -> Option<Next<T, M>> {
        if let Item::Task(_) = self.items.front()? {
            poll_fn(|cx| {
                self.poll_running(cx);
                match self.items.front() {
                    Some(Item::Task(MaybeDone::Future(_))) => Poll::Pending,
                    _ => Poll::Ready(()),
                }
            })
            .await;
        }
        match self.items.pop_front()? {
            Item::Mark(m) => Some(Next::Mark(m)),
            Item::Task(mut t) => {
                let out = std::pin::Pin::new(&mut t).take_output();
                Some(Next::Done(out.expect("the front task is done")))
            }
        }
    }

    /// A stop: the tasks not started are dropped with every mark, and those running are run to
    /// their end (so nothing is still writing when the import returns); their outputs dropped.
    pub(super) async fn finish(&mut self) {
        let mut running = 0;
        self.items.retain(|i| match i {
            Item::Task(_) if running < self.limit => {
                running += 1;
                true
            }
            _ => false,
        });
        while self.next().await.is_some() {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt as _;
    use std::cell::RefCell;
    use std::rc::Rc;

    /// A task that records when it starts and finishes, yielding `yields` times in between.
    fn task<'t>(
        log: &Rc<RefCell<Vec<String>>>,
        name: &'static str,
        yields: usize,
    ) -> LocalBoxFuture<'t, &'static str> {
        let log = log.clone();
        async move {
            log.borrow_mut().push(format!("start {name}"));
            for _ in 0..yields {
                tokio::task::yield_now().await;
            }
            log.borrow_mut().push(format!("end {name}"));
            name
        }
        .boxed_local()
    }

    #[tokio::test(flavor = "current_thread")]
    async fn at_most_the_limit_run_and_outputs_come_in_order() {
        let log = Rc::new(RefCell::new(Vec::new()));
        let mut q: Queue<&str, &str> = Queue::new(2);
        q.push_task(task(&log, "a", 5));
        q.push_task(task(&log, "b", 1));
        q.push_mark("end of window");
        q.push_task(task(&log, "c", 1));
        assert_eq!(q.marks(|_| true), 1);
        let mut out = Vec::new();
        while let Some(n) = q.next().await {
            out.push(match n {
                Next::Done(t) => t,
                Next::Mark(m) => m,
            });
        }
        assert_eq!(out, ["a", "b", "end of window", "c"]);
        let log = log.borrow();
        // `c` waits until `a` is taken: only two run at once, `b` finishing first changes nothing.
        let start_c = log.iter().position(|l| l == "start c").unwrap();
        let end_a = log.iter().position(|l| l == "end a").unwrap();
        let end_b = log.iter().position(|l| l == "end b").unwrap();
        assert!(end_b < end_a, "{log:?}");
        assert!(start_c > end_a, "{log:?}");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn other_work_runs_while_the_running_tasks_are_written() {
        let log = Rc::new(RefCell::new(Vec::new()));
        let mut q: Queue<&str, ()> = Queue::new(1);
        q.push_task(task(&log, "a", 2));
        q.push_task(task(&log, "b", 2));
        let work = {
            let log = log.clone();
            async move {
                for _ in 0..10 {
                    tokio::task::yield_now().await;
                }
                log.borrow_mut().push("work done".into());
                7
            }
        };
        assert_eq!(q.drive(work).await, 7);
        // `a` ran to its end meanwhile; `b` did not start (limit 1, `a` not taken yet).
        assert_eq!(*log.borrow(), ["start a", "end a", "work done"]);
        q.finish().await;
        assert!(q.next().await.is_none());
        assert_eq!(log.borrow().len(), 3, "b was dropped unstarted");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_stop_runs_what_is_running_to_its_end() {
        let log = Rc::new(RefCell::new(Vec::new()));
        let mut q: Queue<&str, ()> = Queue::new(2);
        q.push_task(task(&log, "a", 3));
        q.push_task(task(&log, "b", 3));
        q.push_mark(());
        q.push_task(task(&log, "c", 3));
        q.drive(tokio::task::yield_now()).await;
        q.finish().await;
        assert_eq!(
            *log.borrow(),
            ["start a", "start b", "end a", "end b"],
            "a and b finished, c never started"
        );
    }
}
