/*
 * Drives the stock ZooKeeper Java client (sync and async APIs) through one
 * fixed script and prints a deterministic transcript on stdout.
 *
 * test_java_client.py runs this program against real ZooKeeper and against
 * zkcompat and compares the two transcripts. Everything that legitimately
 * differs between two servers is printed in a tagged form the test rewrites:
 *   zx(0x...)   a zxid: replaced by its rank among all zxids of the run
 *   time(ms)    a ctime/mtime: checked to lie within the run, then dropped
 * Session ids are never printed: ephemeralOwner is shown as self/other/0.
 * Child lists are sorted (ZooKeeper returns them in HashSet order).
 *
 * Usage: ClientExercise <connectString> <basePath>
 */

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import org.apache.zookeeper.AsyncCallback;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.Op;
import org.apache.zookeeper.OpResult;
import org.apache.zookeeper.WatchedEvent;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooDefs.Ids;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.data.ACL;
import org.apache.zookeeper.data.Id;
import org.apache.zookeeper.data.Stat;
import org.apache.zookeeper.server.auth.DigestAuthenticationProvider;

public final class ClientExercise {
    private static final int SESSION_TIMEOUT_MS = 10_000;
    private static final long WAIT_MS = 10_000;

    private static String base;
    private static String connectString;
    private static ZooKeeper zk;

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: ClientExercise <connectString> <basePath>");
            System.exit(2);
        }
        String connect = args[0];
        connectString = connect;
        base = args[1];
        zk = connect(connect, "main");
        // Requested 10 s; a server with tickTime=200 clamps it to 20 ticks.
        out("negotiatedTimeout=" + zk.getSessionTimeout());

        syncCrud();
        syncErrors();
        multiOps();
        asyncOps();
        watches();
        auth(connect);
        reconnect(connect);
        closeAndEphemerals(connect);
        out("done");
        System.exit(0);
    }

    // ---------------------------------------------------------------- output

    private static synchronized void out(String line) {
        System.out.println(line);
        System.out.flush();
    }

    private static String rel(String path) {
        if (path == null) {
            return "null";
        }
        return path.startsWith(base) ? "$BASE" + path.substring(base.length()) : path;
    }

    private static String zx(long zxid) {
        return "zx(0x" + Long.toHexString(zxid) + ")";
    }

    private static String owner(long ephemeralOwner) {
        if (ephemeralOwner == 0) {
            return "0";
        }
        return ephemeralOwner == zk.getSessionId() ? "self" : "other";
    }

    private static String stat(Stat s) {
        if (s == null) {
            return "null";
        }
        return "{czxid=" + zx(s.getCzxid()) + " mzxid=" + zx(s.getMzxid())
            + " pzxid=" + zx(s.getPzxid()) + " ctime=time(" + s.getCtime() + ")"
            + " mtime=time(" + s.getMtime() + ") version=" + s.getVersion()
            + " cversion=" + s.getCversion() + " aversion=" + s.getAversion()
            + " ephemeralOwner=" + owner(s.getEphemeralOwner())
            + " dataLength=" + s.getDataLength() + " numChildren=" + s.getNumChildren() + "}";
    }

    private static String data(byte[] b) {
        return b == null ? "null" : "'" + new String(b, StandardCharsets.UTF_8) + "'";
    }

    private static String sorted(List<String> children) {
        if (children == null) {
            return "null";
        }
        List<String> copy = new ArrayList<>(children);
        Collections.sort(copy);
        return copy.toString();
    }

    private static String acls(List<ACL> acl) {
        if (acl == null) {
            return "null";
        }
        List<String> parts = new ArrayList<>();
        for (ACL a : acl) {
            parts.add(a.getId().getScheme() + ":" + a.getId().getId() + ":" + a.getPerms());
        }
        return parts.toString();
    }

    private static String event(WatchedEvent e) {
        return "event{type=" + e.getType() + " state=" + e.getState() + " path=" + rel(e.getPath()) + "}";
    }

    private static String results(List<OpResult> results) {
        List<String> parts = new ArrayList<>();
        for (OpResult r : results) {
            if (r instanceof OpResult.CreateResult) {
                OpResult.CreateResult c = (OpResult.CreateResult) r;
                parts.add("create(" + rel(c.getPath()) + (c.getStat() == null ? "" : " " + stat(c.getStat())) + ")");
            } else if (r instanceof OpResult.SetDataResult) {
                parts.add("setData(" + stat(((OpResult.SetDataResult) r).getStat()) + ")");
            } else if (r instanceof OpResult.DeleteResult) {
                parts.add("delete");
            } else if (r instanceof OpResult.CheckResult) {
                parts.add("check");
            } else if (r instanceof OpResult.GetDataResult) {
                OpResult.GetDataResult g = (OpResult.GetDataResult) r;
                parts.add("getData(" + data(g.getData()) + " " + stat(g.getStat()) + ")");
            } else if (r instanceof OpResult.GetChildrenResult) {
                parts.add("getChildren(" + sorted(((OpResult.GetChildrenResult) r).getChildren()) + ")");
            } else if (r instanceof OpResult.ErrorResult) {
                parts.add("error(" + KeeperException.Code.get(((OpResult.ErrorResult) r).getErr()) + ")");
            } else {
                parts.add("unknown(" + r.getClass().getSimpleName() + " type=" + r.getType() + ")");
            }
        }
        return parts.toString();
    }

    private static String keeper(KeeperException e) {
        return "KeeperException(" + e.code() + " path=" + rel(e.getPath()) + ")";
    }

    private static byte[] b(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    // ------------------------------------------------------------- plumbing

    /** One-shot watcher that queues its events so the main thread can print them in order. */
    private static final class Recorder implements Watcher {
        final String name;
        final LinkedBlockingQueue<WatchedEvent> events = new LinkedBlockingQueue<>();

        Recorder(String name) {
            this.name = name;
        }

        @Override
        public void process(WatchedEvent e) {
            events.add(e);
        }

        /** Prints the next event, failing loudly if none arrives in time. */
        void expect() throws InterruptedException {
            WatchedEvent e = events.poll(WAIT_MS, TimeUnit.MILLISECONDS);
            out(name + " " + (e == null ? "TIMEOUT waiting for event" : event(e)));
        }

        /** Prints whatever else arrived: a one-shot watch must have nothing more. */
        void drain(long settleMs) throws InterruptedException {
            WatchedEvent e = events.poll(settleMs, TimeUnit.MILLISECONDS);
            while (e != null) {
                out(name + " extra " + event(e));
                e = events.poll();
            }
            out(name + " quiet");
        }
    }

    private static ZooKeeper connect(String connect, String name) throws Exception {
        CountDownLatch connected = new CountDownLatch(1);
        ZooKeeper z = new ZooKeeper(connect, SESSION_TIMEOUT_MS, e -> {
            if (e.getType() == Watcher.Event.EventType.None
                    && e.getState() == Watcher.Event.KeeperState.SyncConnected) {
                connected.countDown();
            }
        });
        if (!connected.await(WAIT_MS, TimeUnit.MILLISECONDS)) {
            out(name + " TIMEOUT connecting");
            System.exit(3);
        }
        return z;
    }

    /** Runs a sync call and prints either its result or the KeeperException code. */
    private interface Call {
        String run() throws KeeperException, InterruptedException;
    }

    private static void call(String label, Call c) throws InterruptedException {
        try {
            out(label + " -> " + c.run());
        } catch (KeeperException e) {
            out(label + " -> " + keeper(e));
        }
    }

    // -------------------------------------------------------------- sections

    private static void syncCrud() throws Exception {
        out("== sync create/read/write");
        call("create base", () -> rel(zk.create(base, b("root"), Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT)));
        call("create persistent", () -> rel(zk.create(base + "/p", b("v0"), Ids.OPEN_ACL_UNSAFE,
            CreateMode.PERSISTENT)));
        call("create ephemeral", () -> rel(zk.create(base + "/e", b("eph"), Ids.OPEN_ACL_UNSAFE,
            CreateMode.EPHEMERAL)));
        call("create persistent_sequential", () -> rel(zk.create(base + "/s-", b(""), Ids.OPEN_ACL_UNSAFE,
            CreateMode.PERSISTENT_SEQUENTIAL)));
        call("create ephemeral_sequential", () -> rel(zk.create(base + "/s-", null, Ids.OPEN_ACL_UNSAFE,
            CreateMode.EPHEMERAL_SEQUENTIAL)));
        call("create sequential trailing slash", () -> rel(zk.create(base + "/p/", b("x"),
            Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT_SEQUENTIAL)));
        call("create container", () -> rel(zk.create(base + "/c", b("c"), Ids.OPEN_ACL_UNSAFE,
            CreateMode.CONTAINER)));
        call("create2 with stat", () -> {
            Stat s = new Stat();
            String p = zk.create(base + "/p2", b("two"), Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT, s);
            return rel(p) + " " + stat(s);
        });
        call("create ttl (extended types disabled)", () -> rel(zk.create(base + "/ttl", b(""),
            Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT_WITH_TTL, new Stat(), 60_000)));

        call("getData base", () -> {
            Stat s = new Stat();
            return data(zk.getData(base, false, s)) + " " + stat(s);
        });
        call("getData ephemeral", () -> {
            Stat s = new Stat();
            return data(zk.getData(base + "/e", false, s)) + " " + stat(s);
        });
        call("getData null data", () -> {
            Stat s = new Stat();
            String seq = sorted(zk.getChildren(base, false));
            String last = null;
            for (String c : zk.getChildren(base, false)) {
                if (c.startsWith("s-") && (last == null || c.compareTo(last) > 0)) {
                    last = c;
                }
            }
            return seq + " " + last + " " + data(zk.getData(base + "/" + last, false, s)) + " " + stat(s);
        });
        call("setData any version", () -> stat(zk.setData(base + "/p", b("v1"), -1)));
        call("setData version 1", () -> stat(zk.setData(base + "/p", b("v2"), 1)));
        call("setData bad version", () -> stat(zk.setData(base + "/p", b("v3"), 7)));
        call("setData empty", () -> stat(zk.setData(base + "/p2", new byte[0], 0)));
        call("getData after set", () -> {
            Stat s = new Stat();
            return data(zk.getData(base + "/p", false, s)) + " " + stat(s);
        });
        call("exists present", () -> stat(zk.exists(base + "/p", false)));
        call("exists missing", () -> stat(zk.exists(base + "/missing", false)));
        call("getChildren with stat", () -> {
            Stat s = new Stat();
            return sorted(zk.getChildren(base, false, s)) + " " + stat(s);
        });
        call("getChildren leaf", () -> sorted(zk.getChildren(base + "/p2", false)));
        call("getAllChildrenNumber", () -> String.valueOf(zk.getAllChildrenNumber(base)));
        call("getEphemerals", () -> {
            List<String> eph = new ArrayList<>();
            for (String p : zk.getEphemerals(base)) {
                eph.add(rel(p));
            }
            Collections.sort(eph);
            return eph.toString();
        });
        call("delete bad version", () -> {
            zk.delete(base + "/p2", 5);
            return "ok";
        });
        call("delete right version", () -> {
            zk.delete(base + "/p2", 1);
            return "ok";
        });
        call("delete any version", () -> {
            zk.delete(base + "/c", -1);
            return "ok";
        });
        call("parent after deletes", () -> stat(zk.exists(base, false)));
    }

    private static void syncErrors() throws Exception {
        out("== sync errors");
        call("create exists", () -> zk.create(base + "/p", b(""), Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT));
        call("create no parent", () -> zk.create(base + "/nope/x", b(""), Ids.OPEN_ACL_UNSAFE,
            CreateMode.PERSISTENT));
        call("create child of ephemeral", () -> zk.create(base + "/e/x", b(""), Ids.OPEN_ACL_UNSAFE,
            CreateMode.PERSISTENT));
        call("create empty acl", () -> zk.create(base + "/noacl", b(""), new ArrayList<>(),
            CreateMode.PERSISTENT));
        call("create creator_all without auth", () -> zk.create(base + "/creator", b(""),
            Ids.CREATOR_ALL_ACL, CreateMode.PERSISTENT));
        call("getData missing", () -> data(zk.getData(base + "/missing", false, null)));
        call("setData missing", () -> stat(zk.setData(base + "/missing", b(""), -1)));
        call("delete missing", () -> {
            zk.delete(base + "/missing", -1);
            return "ok";
        });
        call("delete not empty", () -> {
            zk.delete(base + "/p", -1);
            return "ok";
        });
        call("getChildren missing", () -> sorted(zk.getChildren(base + "/missing", false)));
        call("getACL missing", () -> acls(zk.getACL(base + "/missing", new Stat())));
        call("setACL bad version", () -> stat(zk.setACL(base + "/p", Ids.READ_ACL_UNSAFE, 3)));
    }

    private static void multiOps() throws Exception {
        out("== multi");
        call("multi success", () -> results(zk.multi(Arrays.asList(
            Op.create(base + "/m", b("m0"), Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT),
            Op.create(base + "/m/q-", b(""), Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT_SEQUENTIAL),
            Op.setData(base + "/m", b("m1"), 0),
            Op.check(base + "/m", 1),
            Op.create(base + "/m/tmp", b(""), Ids.OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL),
            Op.delete(base + "/m/tmp", 0)))));
        try {
            zk.multi(Arrays.asList(
                Op.create(base + "/m/never", b(""), Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT),
                Op.setData(base + "/m", b("m2"), -1),
                Op.check(base + "/m", 99),
                Op.delete(base + "/m", -1)));
            out("multi failure -> no exception");
        } catch (KeeperException e) {
            out("multi failure -> " + keeper(e) + " " + results(e.getResults()));
        }
        call("multi failure left no trace", () -> stat(zk.exists(base + "/m/never", false)) + " "
            + data(zk.getData(base + "/m", false, null)));
        try {
            zk.multi(Arrays.asList(
                Op.delete(base + "/m", -1),
                Op.create(base + "/m2", b(""), Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT)));
            out("multi not empty -> no exception");
        } catch (KeeperException e) {
            out("multi not empty -> " + keeper(e) + " " + results(e.getResults()));
        }
        call("transaction commit", () -> results(zk.transaction()
            .create(base + "/t", b("t0"), Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT)
            .check(base + "/t", 0)
            .setData(base + "/t", b("t1"), 0)
            .create(base + "/t/child", null, Ids.OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL_SEQUENTIAL)
            .commit()));
        try {
            zk.transaction()
                .delete(base + "/t/missing", -1)
                .create(base + "/t/other", b(""), Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT)
                .commit();
            out("transaction failure -> no exception");
        } catch (KeeperException e) {
            out("transaction failure -> " + keeper(e) + " " + results(e.getResults()));
        }
        call("multi read", () -> results(zk.multi(Arrays.asList(
            Op.getData(base + "/t"),
            Op.getChildren(base + "/m"),
            Op.getData(base + "/missing"),
            Op.getChildren(base + "/t")))));
        call("multi empty", () -> results(zk.multi(new ArrayList<>())));
    }

    private static void asyncOps() throws Exception {
        out("== async");
        // Every callback runs on the client's single event thread, so the order
        // of lines below is the order in which the server's replies arrived.
        int calls = 12;
        CountDownLatch done = new CountDownLatch(calls);
        Object ctx = "ctx";
        zk.create(base + "/a", b("a0"), Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT,
            (AsyncCallback.StringCallback) (rc, path, c, name) -> {
                out("async create rc=" + KeeperException.Code.get(rc) + " path=" + rel(path)
                    + " ctx=" + c + " name=" + rel(name));
                done.countDown();
            }, ctx);
        zk.create(base + "/a/q-", b(""), Ids.OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL_SEQUENTIAL,
            (AsyncCallback.Create2Callback) (rc, path, c, name, s) -> {
                out("async create2 rc=" + KeeperException.Code.get(rc) + " path=" + rel(path)
                    + " name=" + rel(name) + " stat=" + stat(s));
                done.countDown();
            }, ctx);
        zk.create(base + "/a", b(""), Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT,
            (AsyncCallback.StringCallback) (rc, path, c, name) -> {
                out("async create dup rc=" + KeeperException.Code.get(rc) + " path=" + rel(path)
                    + " name=" + rel(name));
                done.countDown();
            }, ctx);
        zk.getData(base + "/a", false, (rc, path, c, d, s) -> {
            out("async getData rc=" + KeeperException.Code.get(rc) + " path=" + rel(path) + " data="
                + data(d) + " stat=" + stat(s));
            done.countDown();
        }, ctx);
        zk.setData(base + "/a", b("a1"), 0, (rc, path, c, s) -> {
            out("async setData rc=" + KeeperException.Code.get(rc) + " stat=" + stat(s));
            done.countDown();
        }, ctx);
        zk.setData(base + "/a", b("a2"), 0, (rc, path, c, s) -> {
            out("async setData stale rc=" + KeeperException.Code.get(rc) + " stat=" + stat(s));
            done.countDown();
        }, ctx);
        zk.exists(base + "/a/none", false, (rc, path, c, s) -> {
            out("async exists missing rc=" + KeeperException.Code.get(rc) + " path=" + rel(path)
                + " stat=" + stat(s));
            done.countDown();
        }, ctx);
        zk.getChildren(base + "/a", false, (AsyncCallback.Children2Callback) (rc, path, c, ch, s) -> {
            out("async getChildren2 rc=" + KeeperException.Code.get(rc) + " children=" + sorted(ch)
                + " stat=" + stat(s));
            done.countDown();
        }, ctx);
        zk.multi(Arrays.asList(
            Op.create(base + "/a/m", b(""), Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT),
            Op.check(base + "/a", 1)), (rc, path, c, res) -> {
                out("async multi rc=" + KeeperException.Code.get(rc) + " path=" + rel(path)
                    + " results=" + (res == null ? "null" : results(res)));
                done.countDown();
            }, ctx);
        zk.transaction().check(base + "/a", 0).commit((rc, path, c, res) -> {
            out("async multi fail rc=" + KeeperException.Code.get(rc) + " path=" + rel(path)
                + " results=" + (res == null ? "null" : results(res)));
            done.countDown();
        }, ctx);
        zk.delete(base + "/a/m", 0, (rc, path, c) -> {
            out("async delete rc=" + KeeperException.Code.get(rc) + " path=" + rel(path));
            done.countDown();
        }, ctx);
        zk.sync(base + "/a", (rc, path, c) -> {
            out("async sync rc=" + KeeperException.Code.get(rc) + " path=" + rel(path) + " ctx=" + c);
            done.countDown();
        }, ctx);
        if (!done.await(WAIT_MS, TimeUnit.MILLISECONDS)) {
            out("async TIMEOUT: " + done.getCount() + " callbacks missing");
        }
    }

    private static void watches() throws Exception {
        out("== watches");
        zk.create(base + "/w", b("w0"), Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);

        Recorder dataW = new Recorder("dataWatch");
        Recorder childW = new Recorder("childWatch");
        Recorder existsW = new Recorder("existsWatch");
        Recorder existsMissingW = new Recorder("existsMissingWatch");
        call("getData+watch", () -> data(zk.getData(base + "/w", dataW, null)));
        call("getChildren+watch", () -> sorted(zk.getChildren(base + "/w", childW)));
        call("exists+watch", () -> stat(zk.exists(base + "/w", existsW)));
        call("exists missing+watch", () -> stat(zk.exists(base + "/w/kid", existsMissingW)));

        call("setData", () -> stat(zk.setData(base + "/w", b("w1"), -1)));
        dataW.expect();
        existsW.expect();
        call("setData again", () -> stat(zk.setData(base + "/w", b("w2"), -1)));
        call("create kid", () -> rel(zk.create(base + "/w/kid", b(""), Ids.OPEN_ACL_UNSAFE,
            CreateMode.PERSISTENT)));
        existsMissingW.expect();
        childW.expect();
        call("create kid2", () -> rel(zk.create(base + "/w/kid2", b(""), Ids.OPEN_ACL_UNSAFE,
            CreateMode.PERSISTENT)));
        dataW.drain(300);
        existsW.drain(0);
        childW.drain(0);
        existsMissingW.drain(0);

        // Deleting a node fires both its data watch and its own child watch,
        // and the parent's child watch.
        Recorder kidData = new Recorder("kidDataWatch");
        Recorder kidChild = new Recorder("kidChildWatch");
        Recorder parentChild = new Recorder("parentChildWatch");
        call("getData kid+watch", () -> data(zk.getData(base + "/w/kid", kidData, null)));
        call("getChildren kid+watch", () -> sorted(zk.getChildren(base + "/w/kid", kidChild)));
        call("getChildren parent+watch", () -> sorted(zk.getChildren(base + "/w", parentChild)));
        call("delete kid", () -> {
            zk.delete(base + "/w/kid", -1);
            return "ok";
        });
        kidData.expect();
        kidChild.expect();
        parentChild.expect();
        kidData.drain(200);
        kidChild.drain(0);
        parentChild.drain(0);

        // Async: the watch event is delivered before the reply of the setData
        // that caused it, on the same event thread.
        CountDownLatch done = new CountDownLatch(2);
        zk.getData(base + "/w", e -> {
            out("async watch " + event(e));
            done.countDown();
        }, (rc, path, c, d, s) -> out("async getData+watch rc=" + KeeperException.Code.get(rc)
            + " data=" + data(d)), null);
        zk.setData(base + "/w", b("w3"), -1, (rc, path, c, s) -> {
            out("async setData after watch rc=" + KeeperException.Code.get(rc) + " version="
                + (s == null ? "null" : s.getVersion()));
            done.countDown();
        }, null);
        if (!done.await(WAIT_MS, TimeUnit.MILLISECONDS)) {
            out("async watch TIMEOUT");
        }

        // A failed multi changes nothing and so fires nothing.
        Recorder afterFailedMulti = new Recorder("failedMultiWatch");
        call("getData+watch before failed multi", () -> data(zk.getData(base + "/w", afterFailedMulti, null)));
        try {
            zk.multi(Arrays.asList(
                Op.setData(base + "/w", b("never"), -1),
                Op.check(base + "/w", 1234)));
            out("failed multi -> no exception");
        } catch (KeeperException e) {
            out("failed multi -> " + keeper(e));
        }
        afterFailedMulti.drain(300);

        // setACL changes no data: a data watch stays armed.
        call("setACL", () -> stat(zk.setACL(base + "/w", Ids.OPEN_ACL_UNSAFE, -1)));
        afterFailedMulti.drain(300);
        call("setData fires the still-armed watch", () -> String.valueOf(zk.setData(base + "/w", b("w4"), -1)
            .getVersion()));
        afterFailedMulti.expect();

        // Watches on the default watcher via boolean flags.
        Recorder def = new Recorder("defaultWatcher");
        ZooKeeper z2 = new ZooKeeper(connectString, SESSION_TIMEOUT_MS, def);
        waitConnected(def);
        call("z2 exists+watch=true", () -> stat(z2.exists(base + "/w/kid", true)).equals("null") ? "absent" : "present");
        call("create kid again", () -> rel(zk.create(base + "/w/kid", b(""), Ids.OPEN_ACL_UNSAFE,
            CreateMode.EPHEMERAL)));
        def.expect();
        z2.close();
        def.drain(200);
    }

    private static void waitConnected(Recorder r) throws InterruptedException {
        WatchedEvent e = r.events.poll(WAIT_MS, TimeUnit.MILLISECONDS);
        out(r.name + " connect " + (e == null ? "TIMEOUT" : event(e)));
    }

    private static void auth(String connect) throws Exception {
        out("== auth");
        String user = "alice:secret";
        String digest = DigestAuthenticationProvider.generateDigest(user);
        out("digest id = " + digest);
        zk.addAuthInfo("digest", b(user));
        call("create creator_all with auth", () -> rel(zk.create(base + "/secure", b("s"), Ids.CREATOR_ALL_ACL,
            CreateMode.PERSISTENT)));
        call("getACL secure", () -> {
            Stat s = new Stat();
            List<ACL> acl = zk.getACL(base + "/secure", s);
            boolean matches = acl.size() == 1 && acl.get(0).getId().getId().equals(digest);
            return acls(acl) + " matchesDigest=" + matches + " aversion=" + s.getAversion();
        });
        List<ACL> readOnly = new ArrayList<>();
        readOnly.add(new ACL(ZooDefs.Perms.ALL, new Id("digest", digest)));
        readOnly.add(new ACL(ZooDefs.Perms.READ, Ids.ANYONE_ID_UNSAFE));
        call("create mixed acl", () -> rel(zk.create(base + "/mixed", b("m"), readOnly, CreateMode.PERSISTENT)));

        Recorder anonW = new Recorder("anon");
        ZooKeeper anon = new ZooKeeper(connect, SESSION_TIMEOUT_MS, anonW);
        waitConnected(anonW);
        call("anon getData secure", () -> data(anon.getData(base + "/secure", false, null)));
        call("anon setData secure", () -> stat(anon.setData(base + "/secure", b("x"), -1)));
        call("anon create under secure", () -> anon.create(base + "/secure/x", b(""), Ids.OPEN_ACL_UNSAFE,
            CreateMode.PERSISTENT));
        call("anon getACL secure", () -> acls(anon.getACL(base + "/secure", new Stat())));
        call("anon setACL secure", () -> stat(anon.setACL(base + "/secure", Ids.OPEN_ACL_UNSAFE, -1)));
        call("anon exists secure", () -> String.valueOf(anon.exists(base + "/secure", false) != null));
        call("anon getData mixed", () -> data(anon.getData(base + "/mixed", false, null)));
        call("anon setData mixed", () -> stat(anon.setData(base + "/mixed", b("x"), -1)));
        call("anon delete missing under secure", () -> {
            anon.delete(base + "/secure/missing", -1);
            return "ok";
        });
        anon.addAuthInfo("digest", b("alice:wrong"));
        call("wrong password getData secure", () -> data(anon.getData(base + "/secure", false, null)));
        anon.addAuthInfo("digest", b(user));
        call("right password getData secure", () -> data(anon.getData(base + "/secure", false, null)));
        call("authed setACL secure", () -> {
            Stat s = anon.setACL(base + "/secure", readOnly, 0);
            return "aversion=" + s.getAversion();
        });
        call("authed setACL stale aversion", () -> stat(anon.setACL(base + "/secure", readOnly, 0)));
        anon.close();
        anonW.drain(200);

        Recorder badW = new Recorder("badScheme");
        ZooKeeper bad = new ZooKeeper(connect, SESSION_TIMEOUT_MS, badW);
        waitConnected(badW);
        bad.addAuthInfo("no-such-scheme", b("x"));
        badW.expect();
        bad.close();
    }

    /**
     * A loopback TCP relay between a client and the server, so the program can
     * cut that client's connection (and refuse reconnects) while the session lives.
     */
    private static final class Relay implements Runnable {
        private final ServerSocket listener;
        private final String targetHost;
        private final int targetPort;
        private final List<Socket> open = Collections.synchronizedList(new ArrayList<>());
        private volatile boolean up = true;

        Relay(String target) throws IOException {
            int colon = target.lastIndexOf(':');
            targetHost = target.substring(0, colon);
            targetPort = Integer.parseInt(target.substring(colon + 1));
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
                    Socket server = new Socket(targetHost, targetPort);
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
                byte[] buf = new byte[8192];
                try (InputStream in = from.getInputStream(); OutputStream os = to.getOutputStream()) {
                    int n;
                    while ((n = in.read(buf)) >= 0) {
                        os.write(buf, 0, n);
                        os.flush();
                    }
                } catch (IOException e) {
                    // cut() or a peer closed: fall through and close both ends
                } finally {
                    closeQuietly(from);
                    closeQuietly(to);
                }
            }, "relay-pump");
            t.setDaemon(true);
            t.start();
        }

        /** Drops every relayed connection and refuses new ones until restore(). */
        void cut() {
            up = false;
            synchronized (open) {
                for (Socket s : open) {
                    closeQuietly(s);
                }
                open.clear();
            }
        }

        void restore() {
            up = true;
        }

        private static void closeQuietly(Socket s) {
            try {
                s.close();
            } catch (IOException e) {
                // already closed
            }
        }
    }

    private static void reconnect(String connect) throws Exception {
        out("== reconnect (SetWatches)");
        zk.create(base + "/r", b(""), Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        zk.create(base + "/r/d", b("d0"), Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        zk.create(base + "/r/same", b("s0"), Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        zk.create(base + "/r/c", b(""), Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);

        // A relay to one server: of an ensemble's connect string, its first.
        Relay relay = new Relay(connect.split(",")[0]);
        Recorder states = new Recorder("relayedStates");
        ZooKeeper rz = new ZooKeeper(relay.connectString(), SESSION_TIMEOUT_MS, states);
        waitConnected(states);
        long sessionBefore = rz.getSessionId();
        Recorder replay = new Recorder("replayWatch");
        call("relayed getData d+watch", () -> data(rz.getData(base + "/r/d", replay, null)));
        call("relayed exists x+watch", () -> stat(rz.exists(base + "/r/x", replay)));
        call("relayed getChildren c+watch", () -> sorted(rz.getChildren(base + "/r/c", replay)));
        call("relayed getData same+watch", () -> data(rz.getData(base + "/r/same", replay, null)));
        call("relayed create ephemeral", () -> rel(rz.create(base + "/r/eph", b(""), Ids.OPEN_ACL_UNSAFE,
            CreateMode.EPHEMERAL)));

        relay.cut();
        states.expect();
        // Changed while the client cannot reach the server.
        call("set d while away", () -> String.valueOf(zk.setData(base + "/r/d", b("d1"), -1).getVersion()));
        call("create x while away", () -> rel(zk.create(base + "/r/x", b(""), Ids.OPEN_ACL_UNSAFE,
            CreateMode.PERSISTENT)));
        call("create c/k while away", () -> rel(zk.create(base + "/r/c/k", b(""), Ids.OPEN_ACL_UNSAFE,
            CreateMode.PERSISTENT)));
        call("ephemeral survives a disconnect", () -> String.valueOf(zk.exists(base + "/r/eph", false) != null));
        relay.restore();
        states.expect();
        out("same session after reconnect=" + (rz.getSessionId() == sessionBefore));
        // Every watcher hears Disconnected and SyncConnected; then SetWatches
        // replays the data, exist and child watches, in that order.
        for (int i = 0; i < 5; i++) {
            replay.expect();
        }
        replay.drain(300);
        call("set same after reconnect", () -> String.valueOf(zk.setData(base + "/r/same", b("s1"), -1)
            .getVersion()));
        replay.expect();
        replay.drain(300);
        rz.close();
        states.drain(200);
    }

    private static void closeAndEphemerals(String connect) throws Exception {
        out("== close");
        Recorder w = new Recorder("observer");
        ZooKeeper observer = new ZooKeeper(connect, SESSION_TIMEOUT_MS, w);
        waitConnected(w);
        call("observer sees ephemeral", () -> String.valueOf(observer.exists(base + "/e", false) != null));
        Recorder gone = new Recorder("ephemeralGone");
        observer.exists(base + "/e", gone);
        zk.close();
        out("main closed state=" + zk.getState());
        gone.expect();
        call("observer after close", () -> sorted(observer.getChildren(base, false)));
        call("observer getChildren a", () -> sorted(observer.getChildren(base + "/a", false)));
        call("observer getChildren t", () -> sorted(observer.getChildren(base + "/t", false)));
        observer.close();
    }
}
