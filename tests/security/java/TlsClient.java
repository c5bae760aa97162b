// The stock Java client (its TLS or SASL settings come as -D properties): connects (and,
// for the sasl scheme, waits until its SASL authentication is done), prints whoAmI,
// creates PATH with an ACL for SCHEME:ACL_ID (x509 unless a fourth argument names the
// scheme), prints getACL, reads PATH back, and prints a line per step, or the
// KeeperException code a step got.
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.data.ACL;
import org.apache.zookeeper.data.ClientInfo;
import org.apache.zookeeper.data.Id;

public class TlsClient {
    public static void main(String[] args) throws Exception {
        String connect = args[0], path = args[1], aclId = args[2];
        String scheme = args.length > 3 ? args[3] : "x509";
        Watcher.Event.KeeperState ready = scheme.equals("sasl")
            ? Watcher.Event.KeeperState.SaslAuthenticated
            : Watcher.Event.KeeperState.SyncConnected;
        CountDownLatch connected = new CountDownLatch(1);
        ZooKeeper zk = new ZooKeeper(connect, 10000, e -> {
            if (e.getState() == ready) connected.countDown();
            if (e.getState() == Watcher.Event.KeeperState.AuthFailed) {
                System.out.println("event: AuthFailed");
            }
        });
        try {
            if (!connected.await(15, TimeUnit.SECONDS)) {
                System.out.println("connect: failed");
                return;
            }
            System.out.println("connect: ok");
            try {
                for (ClientInfo info : zk.whoAmI()) {
                    System.out.println("whoami: " + info.getAuthScheme() + " " + info.getUser());
                }
            } catch (Exception e) {  // 3.8's whoAmI does not declare KeeperException
                System.out.println("whoami: " + (e instanceof KeeperException
                    ? ((KeeperException) e).code() : e.getClass().getSimpleName()));
            }
            List<ACL> acl = Collections.singletonList(
                new ACL(ZooDefs.Perms.ALL, new Id(scheme, aclId)));
            step("create", () -> zk.create(path, "x".getBytes(), acl, CreateMode.PERSISTENT));
            step("getACL", () -> zk.getACL(path, null).toString().replace("\n", " "));
            step("getData", () -> new String(zk.getData(path, false, null)));
        } finally {
            zk.close();
        }
    }

    interface Step { Object run() throws Exception; }

    static void step(String name, Step s) throws Exception {
        try {
            System.out.println(name + ": " + s.run());
        } catch (KeeperException e) {
            System.out.println(name + ": " + e.code());
        }
    }
}
