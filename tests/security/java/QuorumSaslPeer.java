// One side of ZooKeeper's quorum SASL, run by ZooKeeper's own classes over a loopback
// socket, for tests/security/test_quorum_sasl.py (the JAAS file comes in with
// -Djava.security.auth.login.config, and for Kerberos -Djava.security.krb5.conf):
//   QuorumSaslPeer server <serverRequireSasl> [authzHost,...]
//       listens, prints "port N", accepts one; the hosts a Kerberos learner's principal
//       may name (QuorumPeer gives every server.N's hostname) default to localhost
//   QuorumSaslPeer learner <port> <learnerRequireSasl> [servicePrincipal [hostName]]
//       connects to 127.0.0.1:port asking for servicePrincipal (default zkquorum/localhost)
//       with hostName (default localhost) as the peer's QuorumServer hostname
// Each prints "result ok" or "result error <message>"; after a success it writes its
// marker (what the next layer would send) and prints "after <hex>": every byte it read
// after the exchange, up to the end of the stream (and "reset ..." if the peer reset it).
import java.io.BufferedInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HashSet;
import org.apache.zookeeper.server.quorum.auth.SaslQuorumAuthLearner;
import org.apache.zookeeper.server.quorum.auth.SaslQuorumAuthServer;

public class QuorumSaslPeer {
    public static void main(String[] args) throws Exception {
        if (args[0].equals("server")) {
            boolean require = Boolean.parseBoolean(args[1]);
            String hosts = args.length > 2 ? args[2] : "localhost";
            SaslQuorumAuthServer auth = new SaslQuorumAuthServer(
                require, "QuorumServer", new HashSet<>(Arrays.asList(hosts.split(","))));
            try (ServerSocket listener = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
                System.out.println("port " + listener.getLocalPort());
                System.out.flush();
                try (Socket sock = listener.accept()) {
                    sock.setSoTimeout(30000);
                    // As LearnerHandler and QuorumCnxManager give it: a buffered stream that
                    // the next layer goes on reading from.
                    DataInputStream din = new DataInputStream(
                        new BufferedInputStream(sock.getInputStream()));
                    if (!report(() -> auth.authenticate(sock, din))) {
                        return;
                    }
                    finish(sock, din, "FROM-JAVA-SERVER");
                }
            }
        } else {
            int port = Integer.parseInt(args[1]);
            boolean require = Boolean.parseBoolean(args[2]);
            String servicePrincipal = args.length > 3 ? args[3] : "zkquorum/localhost";
            String hostName = args.length > 4 ? args[4] : "localhost";
            SaslQuorumAuthLearner auth = new SaslQuorumAuthLearner(
                require, servicePrincipal, "QuorumLearner");
            try (Socket sock = new Socket()) {
                sock.connect(new InetSocketAddress(InetAddress.getLoopbackAddress(), port), 30000);
                sock.setSoTimeout(30000);
                if (!report(() -> auth.authenticate(sock, hostName))) {
                    return;
                }
                finish(sock, sock.getInputStream(), "FROM-JAVA-LEARNER");
            }
        }
    }

    interface Step {
        void run() throws Exception;
    }

    static boolean report(Step step) {
        try {
            step.run();
            System.out.println("result ok");
            return true;
        } catch (Exception e) {
            System.out.println("result error " + e.getMessage());
            return false;
        } finally {
            System.out.flush();
        }
    }

    static void finish(Socket sock, InputStream in, String marker) throws Exception {
        sock.getOutputStream().write(marker.getBytes(StandardCharsets.US_ASCII));
        sock.getOutputStream().flush();
        sock.shutdownOutput();
        ByteArrayOutputStream rest = new ByteArrayOutputStream();
        byte[] chunk = new byte[4096];
        try {
            for (int n; (n = in.read(chunk)) > 0; ) {
                rest.write(chunk, 0, n);
            }
        } catch (java.io.IOException e) {
            // The other side closed on us (it refused the connection): say so.
            System.out.println("reset " + e.getMessage());
        }
        StringBuilder hex = new StringBuilder();
        for (byte b : rest.toByteArray()) {
            hex.append(String.format("%02x", b));
        }
        System.out.println("after " + hex);
    }
}
