/*
 * Runs Apache Curator 5.4 recipes (on the stock ZooKeeper 3.8 Java client)
 * against one server and prints one line per check:
 *
 *   PASS <part>: <what was shown>
 *   FAIL <part>: <what went wrong>
 *
 * then "DONE failures=N"; the exit status is 1 if anything failed. Every part
 * runs under its own deadline (PART_TIMEOUT_S) and the whole run under
 * RUN_TIMEOUT_S, so a hung recipe is a FAIL line, never a hang. The PASS text
 * holds no timings, session ids or zxids: two correct servers print the same
 * transcript, which test_curator.py compares.
 *
 * The server needs extendedTypesEnabled=true (TTL nodes) and a container
 * reaper that runs often (znode.container.checkIntervalMs) for the container
 * and TTL parts to finish in time.
 *
 * Usage: CuratorExercise <connectString> <basePath>
 */

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.Callable;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.atomic.AtomicValue;
import org.apache.curator.framework.recipes.atomic.DistributedAtomicLong;
import org.apache.curator.framework.recipes.cache.CuratorCache;
import org.apache.curator.framework.recipes.cache.CuratorCacheListener;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderSelector;
import org.apache.curator.framework.recipes.leader.LeaderSelectorListenerAdapter;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.recipes.nodes.PersistentNode;
import org.apache.curator.framework.recipes.nodes.PersistentTtlNode;
import org.apache.curator.retry.RetryNTimes;
import org.apache.zookeeper.AddWatchMode;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.Op;
import org.apache.zookeeper.OpResult;
import org.apache.zookeeper.WatchedEvent;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooDefs.Ids;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.data.ClientInfo;
import org.apache.zookeeper.data.Stat;

public final class CuratorExercise {
    private static final long PART_TIMEOUT_S = 20;
    private static final long RUN_TIMEOUT_S = 50;
    private static final long WAIT_S = 10;
    private static final int SESSION_TIMEOUT_MS = 10_000;

    private static String connect;
    private static String base;
    private static int failures;
    private static final List<CuratorFramework> clients = Collections.synchronizedList(new ArrayList<>());

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: CuratorExercise <connectString> <basePath>");
            System.exit(2);
        }
        connect = args[0];
        base = args[1];
        long runDeadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(RUN_TIMEOUT_S);

        part("setup", runDeadline, CuratorExercise::setup);
        part("CuratorCache", runDeadline, CuratorExercise::curatorCache);
        part("LeaderLatch", runDeadline, CuratorExercise::leaderLatch);
        part("LeaderSelector", runDeadline, CuratorExercise::leaderSelector);
        part("InterProcessMutex", runDeadline, CuratorExercise::mutex);
        part("InterProcessSemaphoreV2", runDeadline, CuratorExercise::semaphore);
        part("DistributedAtomicLong", runDeadline, CuratorExercise::atomicLong);
        part("PersistentNode", runDeadline, CuratorExercise::persistentNode);
        part("containers", runDeadline, CuratorExercise::containers);
        part("TTL nodes", runDeadline, CuratorExercise::ttlNodes);
        part("PersistentTtlNode", runDeadline, CuratorExercise::persistentTtlNode);
        part("ZooKeeper client 3.6+ API", runDeadline, CuratorExercise::clientApi);
        part("ZooKeeper client SetWatches2", runDeadline, CuratorExercise::setWatches2);

        System.out.println("DONE failures=" + failures);
        System.out.flush();
        Runtime.getRuntime().halt(failures == 0 ? 0 : 1);  // no waiting on hung recipe threads
    }

    // ------------------------------------------------------------- plumbing

    private static void part(String name, long runDeadline, Callable<String> body) {
        long leftNs = runDeadline - System.nanoTime();
        if (leftNs <= 0) {
            fail(name, "not run: the whole run passed " + RUN_TIMEOUT_S + "s");
            return;
        }
        long timeoutNs = Math.min(leftNs, TimeUnit.SECONDS.toNanos(PART_TIMEOUT_S));
        ExecutorService runner = Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, "part-" + name);
            t.setDaemon(true);
            return t;
        });
        Future<String> result = runner.submit(body);
        try {
            String detail = result.get(timeoutNs, TimeUnit.NANOSECONDS);
            System.out.println("PASS " + name + ": " + detail);
        } catch (TimeoutException e) {
            result.cancel(true);
            fail(name, "timed out after " + TimeUnit.NANOSECONDS.toSeconds(timeoutNs) + "s");
        } catch (Exception e) {
            Throwable cause = e.getCause() != null ? e.getCause() : e;
            fail(name, cause.getClass().getSimpleName() + ": " + cause.getMessage() + where(cause));
        } finally {
            runner.shutdownNow();
            closeClients();
        }
        System.out.flush();
    }

    /** " (CuratorExercise.java:N)": the line of this program the failure came from. */
    private static String where(Throwable t) {
        for (StackTraceElement frame : t.getStackTrace()) {
            if (frame.getClassName().startsWith(CuratorExercise.class.getName())) {
                return " (" + frame.getFileName() + ":" + frame.getLineNumber() + ")";
            }
        }
        return "";
    }

    private static void fail(String name, String why) {
        failures++;
        System.out.println("FAIL " + name + ": " + why);
    }

    private static void check(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError(what);
        }
    }

    private static CuratorFramework client() throws InterruptedException {
        CuratorFramework c = CuratorFrameworkFactory.builder()
                .connectString(connect)
                .sessionTimeoutMs(SESSION_TIMEOUT_MS)
                .connectionTimeoutMs(SESSION_TIMEOUT_MS)
                .retryPolicy(new RetryNTimes(20, 200))
                .build();
        clients.add(c);
        c.start();
        check(c.blockUntilConnected((int) WAIT_S, TimeUnit.SECONDS), "client connected");
        return c;
    }

    private static void closeClients() {
        synchronized (clients) {
            for (CuratorFramework c : clients) {
                try {
                    c.close();
                } catch (RuntimeException ignored) {
                    // best effort
                }
            }
            clients.clear();
        }
    }

    interface Condition {
        boolean holds() throws Exception;
    }

    private static boolean waitFor(Condition condition, long seconds) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (System.nanoTime() < deadline) {
            if (condition.holds()) {
                return true;
            }
            Thread.sleep(50);
        }
        return condition.holds();
    }

    private static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    private static String str(byte[] b) {
        return b == null ? "null" : new String(b, StandardCharsets.UTF_8);
    }

    private static String rel(String path, String root) {
        return path.equals(root) ? "." : path.substring(root.length());
    }

    private static void joinAll(List<Thread> threads) throws InterruptedException {
        for (Thread t : threads) {
            t.start();
        }
        for (Thread t : threads) {
            t.join(TimeUnit.SECONDS.toMillis(PART_TIMEOUT_S));
            check(!t.isAlive(), t.getName() + " finished");
        }
    }

    // ---------------------------------------------------------------- parts

    private static String setup() throws Exception {
        CuratorFramework c = client();
        c.create().creatingParentsIfNeeded().forPath(base, new byte[0]);
        return "base created";
    }

    /** CuratorCache runs on a PERSISTENT_RECURSIVE watch (addWatch) on 3.6+ servers. */
    private static String curatorCache() throws Exception {
        CuratorFramework c = client();
        String root = base + "/cache";
        c.create().creatingParentsIfNeeded().forPath(root + "/a", bytes("1"));
        c.create().forPath(root + "/a/deep", bytes("d"));
        BlockingQueue<String> events = new LinkedBlockingQueue<>();
        CountDownLatch initialized = new CountDownLatch(1);
        CuratorCache cache = CuratorCache.build(c, root);
        cache.listenable().addListener(CuratorCacheListener.builder()
                .forCreates(n -> events.add("create " + rel(n.getPath(), root) + "=" + str(n.getData())))
                .forChanges((old, n) -> events.add(
                        "change " + rel(n.getPath(), root) + "=" + str(old.getData()) + "->" + str(n.getData())))
                .forDeletes(n -> events.add("delete " + rel(n.getPath(), root)))
                .forInitialized(initialized::countDown)
                .build());
        cache.start();
        try {
            check(initialized.await(WAIT_S, TimeUnit.SECONDS), "initial build finished");
            List<String> initial = new ArrayList<>();
            events.drainTo(initial);
            Collections.sort(initial);
            check(initial.equals(List.of("create .=", "create /a/deep=d", "create /a=1")),
                    "initial build saw the tree: " + initial);

            List<String> seen = new ArrayList<>();
            c.create().forPath(root + "/b", bytes("2"));
            expect(events, seen, "create /b=2");
            c.setData().forPath(root + "/a", bytes("11"));
            expect(events, seen, "change /a=1->11");
            c.create().creatingParentsIfNeeded().forPath(root + "/b/x/y", bytes("y"));
            expect(events, seen, "create /b/x=");
            expect(events, seen, "create /b/x/y=y");
            c.setData().forPath(root + "/b/x/y", bytes("yy"));
            expect(events, seen, "change /b/x/y=y->yy");
            c.delete().deletingChildrenIfNeeded().forPath(root + "/a");
            expect(events, seen, "delete /a/deep");
            expect(events, seen, "delete /a");
            check(cache.size() == 4, "cache holds 4 nodes, not " + cache.size());
            check(cache.get(root + "/b/x/y").map(d -> str(d.getData())).orElse("").equals("yy"),
                    "cache has the new data");
            return "initial " + initial + "; then " + seen + "; size 4";
        } finally {
            cache.close();
        }
    }

    private static void expect(BlockingQueue<String> events, List<String> seen, String wanted)
            throws InterruptedException {
        String got = events.poll(WAIT_S, TimeUnit.SECONDS);
        check(wanted.equals(got), "expected event '" + wanted + "', got '" + got + "' after " + seen);
        seen.add(got);
    }

    private static String leaderLatch() throws Exception {
        String path = base + "/latch";
        LeaderLatch one = new LeaderLatch(client(), path, "one");
        LeaderLatch two = new LeaderLatch(client(), path, "two");
        one.start();
        two.start();
        try {
            check(waitFor(() -> one.hasLeadership() || two.hasLeadership(), WAIT_S), "a leader is elected");
            Thread.sleep(300);
            check(one.hasLeadership() != two.hasLeadership(), "exactly one leader");
            LeaderLatch leader = one.hasLeadership() ? one : two;
            LeaderLatch follower = leader == one ? two : one;
            check(follower.getLeader().getId().equals(leader.getId()), "the follower sees the same leader");
            check(leader.getParticipants().size() == 2, "two participants");
            leader.close();
            check(follower.await(WAIT_S, TimeUnit.SECONDS), "the follower takes over after close");
            check(waitFor(() -> follower.getParticipants().size() == 1, WAIT_S), "one participant left");
            follower.close();
            return "exactly one of two leads; the other takes over when it closes";
        } finally {
            for (LeaderLatch l : List.of(one, two)) {
                if (l.getState() == LeaderLatch.State.STARTED) {
                    l.close();
                }
            }
        }
    }

    private static String leaderSelector() throws Exception {
        String path = base + "/selector";
        AtomicInteger leading = new AtomicInteger();
        AtomicInteger maxLeading = new AtomicInteger();
        Map<String, AtomicInteger> turns = new ConcurrentHashMap<>();
        List<LeaderSelector> selectors = new ArrayList<>();
        for (String id : List.of("one", "two")) {
            turns.put(id, new AtomicInteger());
            LeaderSelector s = new LeaderSelector(client(), path, new LeaderSelectorListenerAdapter() {
                @Override
                public void takeLeadership(CuratorFramework c) throws Exception {
                    maxLeading.accumulateAndGet(leading.incrementAndGet(), Math::max);
                    try {
                        Thread.sleep(100);
                        turns.get(id).incrementAndGet();
                    } finally {
                        leading.decrementAndGet();
                    }
                }
            });
            s.setId(id);
            s.autoRequeue();
            selectors.add(s);
        }
        selectors.forEach(LeaderSelector::start);
        try {
            check(waitFor(() -> turns.get("one").get() >= 3 && turns.get("two").get() >= 3, 15),
                    "both took at least three turns: " + turns);
        } finally {
            selectors.forEach(LeaderSelector::close);
        }
        check(maxLeading.get() == 1, "never two leaders at once (max " + maxLeading.get() + ")");
        return "two selectors took turns (>= 3 each); never two leaders at once";
    }

    private static String mutex() throws Exception {
        String path = base + "/mutex";
        int[] counter = {0};
        AtomicInteger holders = new AtomicInteger();
        AtomicInteger maxHolders = new AtomicInteger();
        AtomicInteger failed = new AtomicInteger();
        List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < 2; t++) {
            CuratorFramework c = client();
            threads.add(new Thread(() -> {
                InterProcessMutex lock = new InterProcessMutex(c, path);
                for (int i = 0; i < 15; i++) {
                    try {
                        if (!lock.acquire(WAIT_S, TimeUnit.SECONDS)) {
                            failed.incrementAndGet();
                            return;
                        }
                        try {
                            maxHolders.accumulateAndGet(holders.incrementAndGet(), Math::max);
                            int v = counter[0];
                            Thread.sleep(3);  // widen the window a missing lock would show
                            counter[0] = v + 1;
                            holders.decrementAndGet();
                        } finally {
                            lock.release();
                        }
                    } catch (Exception e) {
                        failed.incrementAndGet();
                        return;
                    }
                }
            }, "mutex-" + t));
        }
        joinAll(threads);
        check(failed.get() == 0, failed.get() + " acquisitions failed");
        check(maxHolders.get() == 1, "never two holders (max " + maxHolders.get() + ")");
        check(counter[0] == 30, "counter is 30, not " + counter[0]);
        return "2 threads x 15 increments under the lock = 30; never two holders";
    }

    private static String semaphore() throws Exception {
        String path = base + "/semaphore";
        AtomicInteger holding = new AtomicInteger();
        AtomicInteger maxHolding = new AtomicInteger();
        AtomicInteger leases = new AtomicInteger();
        AtomicInteger failed = new AtomicInteger();
        List<CuratorFramework> cs = List.of(client(), client());
        List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < 5; t++) {
            CuratorFramework c = cs.get(t % 2);
            threads.add(new Thread(() -> {
                InterProcessSemaphoreV2 semaphore = new InterProcessSemaphoreV2(c, path, 2);
                try {
                    Lease lease = semaphore.acquire(15, TimeUnit.SECONDS);
                    if (lease == null) {
                        failed.incrementAndGet();
                        return;
                    }
                    try {
                        maxHolding.accumulateAndGet(holding.incrementAndGet(), Math::max);
                        leases.incrementAndGet();
                        Thread.sleep(300);
                        holding.decrementAndGet();
                    } finally {
                        semaphore.returnLease(lease);
                    }
                } catch (Exception e) {
                    failed.incrementAndGet();
                }
            }, "semaphore-" + t));
        }
        joinAll(threads);
        check(failed.get() == 0, failed.get() + " threads got no lease");
        check(leases.get() == 5, "5 leases granted, not " + leases.get());
        check(maxHolding.get() == 2, "at most and at some point 2 holders (max " + maxHolding.get() + ")");
        return "5 threads, 2 leases: all served, never more than 2 at once, 2 reached";
    }

    private static String atomicLong() throws Exception {
        String path = base + "/counter";
        AtomicInteger failed = new AtomicInteger();
        List<CuratorFramework> cs = List.of(client(), client());
        List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < 4; t++) {
            CuratorFramework c = cs.get(t % 2);
            threads.add(new Thread(() -> {
                DistributedAtomicLong counter = new DistributedAtomicLong(c, path, new RetryNTimes(100, 5));
                for (int i = 0; i < 10; i++) {
                    try {
                        boolean done = false;
                        for (int attempt = 0; attempt < 20 && !done; attempt++) {
                            AtomicValue<Long> v = counter.increment();
                            done = v.succeeded();
                        }
                        if (!done) {
                            failed.incrementAndGet();
                        }
                    } catch (Exception e) {
                        failed.incrementAndGet();
                    }
                }
            }, "counter-" + t));
        }
        joinAll(threads);
        check(failed.get() == 0, failed.get() + " increments never succeeded");
        long total = new DistributedAtomicLong(cs.get(0), path, new RetryNTimes(3, 10)).get().postValue();
        check(total == 40, "total is 40, not " + total);
        return "4 threads x 10 increments = 40";
    }

    private static String persistentNode() throws Exception {
        String path = base + "/persistent-node";
        CuratorFramework owner = client();
        CuratorFramework other = client();
        PersistentNode node = new PersistentNode(owner, CreateMode.EPHEMERAL, false, path, bytes("v"));
        node.start();
        try {
            check(node.waitForInitialCreate(WAIT_S, TimeUnit.SECONDS), "initial create");
            Stat stat = other.checkExists().forPath(path);
            check(stat != null && stat.getEphemeralOwner() == owner.getZookeeperClient().getZooKeeper().getSessionId(),
                    "ephemeral of the owner's session");
            other.delete().forPath(path);
            check(waitFor(() -> other.checkExists().forPath(path) != null, WAIT_S), "recreated after deletion");
            check(str(other.getData().forPath(path)).equals("v"), "recreated with its data");
        } finally {
            node.close();
        }
        check(waitFor(() -> other.checkExists().forPath(path) == null, WAIT_S), "gone after close");
        return "ephemeral created, recreated after another client deleted it, removed on close";
    }

    private static String containers() throws Exception {
        CuratorFramework c = client();
        String root = base + "/containers";
        c.create().creatingParentContainersIfNeeded().forPath(root + "/a/leaf", bytes("x"));
        Stat parent = c.checkExists().forPath(root + "/a");
        check(parent != null && parent.getEphemeralOwner() == 0, "container parents show ephemeralOwner 0");
        c.delete().forPath(root + "/a/leaf");
        check(waitFor(() -> c.checkExists().forPath(root + "/a") == null, WAIT_S),
                "the emptied container parent is reaped");
        check(waitFor(() -> c.checkExists().forPath(root) == null, WAIT_S),
                "and then its container parent");
        c.create().withMode(CreateMode.CONTAINER).forPath(base + "/c2");
        c.create().forPath(base + "/c2/x");
        c.delete().forPath(base + "/c2/x");
        check(waitFor(() -> c.checkExists().forPath(base + "/c2") == null, WAIT_S),
                "a CreateMode.CONTAINER node is reaped once emptied");
        check(c.checkExists().forPath(base) != null, "the plain base stays");
        return "creatingParentContainersIfNeeded parents and CreateMode.CONTAINER reaped once emptied";
    }

    private static String ttlNodes() throws Exception {
        CuratorFramework c = client();
        String root = base + "/ttl";
        c.create().forPath(root);
        c.create().withTtl(300).withMode(CreateMode.PERSISTENT_WITH_TTL).forPath(root + "/t", bytes("t"));
        Stat stat = c.checkExists().forPath(root + "/t");
        check(stat != null && stat.getEphemeralOwner() == 0, "TTL node exists, ephemeralOwner 0");
        String seq = c.create().withTtl(300).withMode(CreateMode.PERSISTENT_SEQUENTIAL_WITH_TTL)
                .forPath(root + "/s-");
        check(seq.matches(".*/s-\\d{10}"), "sequential TTL name " + seq);
        c.create().withTtl(300).withMode(CreateMode.PERSISTENT_WITH_TTL).forPath(root + "/kept");
        c.create().forPath(root + "/kept/child");
        check(waitFor(() -> c.checkExists().forPath(root + "/t") == null, WAIT_S), "TTL node expired");
        check(waitFor(() -> c.checkExists().forPath(seq) == null, WAIT_S), "sequential TTL node expired");
        check(c.checkExists().forPath(root + "/kept") != null, "a TTL node with a child stays");
        c.delete().forPath(root + "/kept/child");
        check(waitFor(() -> c.checkExists().forPath(root + "/kept") == null, WAIT_S),
                "and expires once childless");
        return "PERSISTENT_WITH_TTL and PERSISTENT_SEQUENTIAL_WITH_TTL expire; a child keeps one alive";
    }

    private static String persistentTtlNode() throws Exception {
        CuratorFramework c = client();
        String path = base + "/pttl";
        PersistentTtlNode node = new PersistentTtlNode(c, path, 600, bytes("v"));
        node.start();
        try {
            check(node.waitForInitialCreate(WAIT_S, TimeUnit.SECONDS), "initial create");
            Thread.sleep(1500);  // more than twice the TTL: only the touches keep it
            check(c.checkExists().forPath(path) != null, "kept alive while running");
            check(str(c.getData().forPath(path)).equals("v"), "data");
        } finally {
            node.close();
        }
        check(waitFor(() -> c.checkExists().forPath(path) == null, WAIT_S), "gone after close");
        return "container + touched TTL child stays while running, goes after close";
    }
    /** The stock client's calls for the newer ops: getEphemerals (103),
     *  getAllChildrenNumber (104), whoAmI (107), multiRead (22), addWatch (106),
     *  checkWatches (17, removeWatches of one watcher), removeWatches (18),
     *  createTTL (21). */
    private static String clientApi() throws Exception {
        ZooKeeper zk = client().getZookeeperClient().getZooKeeper();
        String root = base + "/api";
        zk.create(root, bytes(""), Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        zk.create(root + "/a", bytes("A"), Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        zk.create(root + "/b", bytes(""), Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        zk.create(root + "/b/x", bytes(""), Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        zk.create(root + "/e1", bytes(""), Ids.OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL);
        zk.create(root + "/b/e2", bytes(""), Ids.OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL);
        List<String> ephemerals = new ArrayList<>();
        for (String p : zk.getEphemerals(root)) {
            ephemerals.add(rel(p, root));
        }
        Collections.sort(ephemerals);
        check(ephemerals.equals(List.of("/b/e2", "/e1")), "getEphemerals: " + ephemerals);
        int below = zk.getAllChildrenNumber(root);
        check(below == 5, "getAllChildrenNumber is 5, not " + below);
        List<String> who = new ArrayList<>();
        for (ClientInfo info : zk.whoAmI()) {
            who.add(info.getAuthScheme() + ":" + info.getUser());
        }
        check(who.equals(List.of("ip:127.0.0.1")), "whoAmI: " + who);
        List<OpResult> reads = zk.multi(List.of(
                Op.getData(root + "/a"), Op.getChildren(root + "/b"), Op.getData(root + "/missing")));
        check(reads.get(0) instanceof OpResult.GetDataResult
                && str(((OpResult.GetDataResult) reads.get(0)).getData()).equals("A"), "multiRead getData");
        check(reads.get(1) instanceof OpResult.GetChildrenResult, "multiRead getChildren");
        List<String> kids = new ArrayList<>(((OpResult.GetChildrenResult) reads.get(1)).getChildren());
        Collections.sort(kids);
        check(kids.equals(List.of("e2", "x")), "multiRead children " + kids);
        check(reads.get(2) instanceof OpResult.ErrorResult
                && ((OpResult.ErrorResult) reads.get(2)).getErr() == KeeperException.Code.NONODE.intValue(),
                "multiRead per-op NoNode");

        BlockingQueue<String> events = new LinkedBlockingQueue<>();
        Watcher recorder = e -> events.add(e.getType() + " " + rel(e.getPath(), root));
        zk.addWatch(root, recorder, AddWatchMode.PERSISTENT_RECURSIVE);
        zk.setData(root + "/a", bytes("A2"), -1);
        zk.create(root + "/b/y", bytes(""), Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        List<String> seen = new ArrayList<>();
        expect(events, seen, "NodeDataChanged /a");
        expect(events, seen, "NodeCreated /b/y");
        zk.removeWatches(root, recorder, Watcher.WatcherType.Any, false);
        zk.setData(root + "/a", bytes("A3"), -1);
        String late = events.poll(300, TimeUnit.MILLISECONDS);
        check(late == null || late.startsWith("PersistentWatchRemoved") || late.startsWith("DataWatchRemoved"),
                "nothing after removeWatches, got " + late);
        try {
            zk.removeAllWatches(root + "/a", Watcher.WatcherType.Any, false);
            throw new AssertionError("removeAllWatches without watches did not fail");
        } catch (KeeperException.NoWatcherException expected) {
            // the client finds none locally
        }
        Stat ttlStat = new Stat();
        zk.create(root + "/ttl", bytes(""), Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT_WITH_TTL, ttlStat, 60_000);
        check(ttlStat.getEphemeralOwner() == 0 && ttlStat.getCzxid() > 0, "createTTL answered a Stat");
        return "getEphemerals " + ephemerals + ", getAllChildrenNumber 5, whoAmI " + who
                + ", multiRead with per-op NoNode, addWatch " + seen + ", removeWatches, createTTL";
    }

    /** On reconnect the stock client re-registers persistent watches with
     *  SetWatches2 (105); one-shot watches whose node changed meanwhile fire. */
    private static String setWatches2() throws Exception {
        ZooKeeper writer = client().getZookeeperClient().getZooKeeper();
        String root = base + "/sw";
        writer.create(root, bytes(""), Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        writer.create(root + "/one", bytes("0"), Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        writer.create(root + "/p", bytes("0"), Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        Relay relay = new Relay(connect);
        BlockingQueue<Watcher.Event.KeeperState> states = new LinkedBlockingQueue<>();
        ZooKeeper rz = new ZooKeeper(relay.connectString(), SESSION_TIMEOUT_MS, e -> {
            if (e.getType() == Watcher.Event.EventType.None) {
                states.add(e.getState());
            }
        });
        try {
            check(states.poll(WAIT_S, TimeUnit.SECONDS) == Watcher.Event.KeeperState.SyncConnected, "connected");
            long session = rz.getSessionId();
            BlockingQueue<String> events = new LinkedBlockingQueue<>();
            Watcher recorder = e -> events.add(e.getType() + " " + rel(e.getPath(), root));
            rz.addWatch(root + "/tree", recorder, AddWatchMode.PERSISTENT_RECURSIVE);
            rz.addWatch(root + "/p", recorder, AddWatchMode.PERSISTENT);
            rz.getData(root + "/one", recorder, null);
            relay.cut();
            check(states.poll(WAIT_S, TimeUnit.SECONDS) == Watcher.Event.KeeperState.Disconnected, "disconnected");
            writer.setData(root + "/one", bytes("1"), -1);
            writer.create(root + "/tree", bytes(""), Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
            writer.setData(root + "/p", bytes("1"), -1);
            relay.restore();
            check(states.poll(WAIT_S, TimeUnit.SECONDS) == Watcher.Event.KeeperState.SyncConnected, "reconnected");
            check(rz.getSessionId() == session, "same session");
            List<String> seen = new ArrayList<>();
            expect(events, seen, "NodeDataChanged /one");
            writer.create(root + "/tree/x", bytes(""), Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
            expect(events, seen, "NodeCreated /tree/x");
            writer.setData(root + "/p", bytes("2"), -1);
            expect(events, seen, "NodeDataChanged /p");
            writer.setData(root + "/one", bytes("2"), -1);
            String extra = events.poll(300, TimeUnit.MILLISECONDS);
            check(extra == null, "no more events, got " + extra);
            return "across a reconnect: " + seen;
        } finally {
            rz.close();
            relay.close();
        }
    }

    /** A TCP relay the test can cut (every connection dropped, new ones refused)
     *  and restore, to make the client reconnect to the same session. */
    private static final class Relay implements Runnable {
        private final ServerSocket listener;
        private final String host;
        private final int port;
        private final List<Socket> open = Collections.synchronizedList(new ArrayList<>());
        private volatile boolean up = true;

        Relay(String target) throws IOException {
            int colon = target.lastIndexOf(':');
            host = target.substring(0, colon);
            port = Integer.parseInt(target.substring(colon + 1));
            listener = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
            Thread t = new Thread(this, "relay-accept");
            t.setDaemon(true);
            t.start();
        }

        String connectString() {
            return "127.0.0.1:" + listener.getLocalPort();
        }

        @Override
        public void run() {
            while (true) {
                try {
                    Socket client = listener.accept();
                    if (!up) {
                        client.close();
                        continue;
                    }
                    Socket server = new Socket(host, port);
                    open.add(client);
                    open.add(server);
                    pump(client, server);
                    pump(server, client);
                } catch (IOException e) {
                    return;
                }
            }
        }

        private void pump(Socket from, Socket to) {
            Thread t = new Thread(() -> {
                byte[] buf = new byte[65536];
                try (InputStream in = from.getInputStream(); OutputStream out = to.getOutputStream()) {
                    int n;
                    while ((n = in.read(buf)) >= 0) {
                        out.write(buf, 0, n);
                        out.flush();
                    }
                } catch (IOException ignored) {
                    // the other side went away
                } finally {
                    closeQuietly(from);
                    closeQuietly(to);
                }
            }, "relay-pump");
            t.setDaemon(true);
            t.start();
        }

        void cut() {
            up = false;
            synchronized (open) {
                open.forEach(Relay::closeQuietly);
                open.clear();
            }
        }

        void restore() {
            up = true;
        }

        void close() {
            cut();
            closeQuietly(listener);
        }

        private static void closeQuietly(java.io.Closeable c) {
            try {
                c.close();
            } catch (IOException ignored) {
                // already closed
            }
        }
    }
}
