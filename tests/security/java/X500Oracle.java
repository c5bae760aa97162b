// What ZooKeeper's X509AuthenticationProvider makes of names: for each argument that is a
// certificate file, the x509 id it gives the client (getClientId: the subject's
// X500Principal.getName()); then, for each line of stdin (hex of UTF-8), whether isValid
// accepts it as an ACL id. One output line per input, in order.
import java.io.BufferedReader;
import java.io.FileInputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import org.apache.zookeeper.server.auth.X509AuthenticationProvider;

public class X500Oracle {
    public static void main(String[] args) throws Exception {
        CertificateFactory factory = CertificateFactory.getInstance("X.509");
        for (String path : args) {
            try (FileInputStream in = new FileInputStream(path)) {
                X509Certificate cert = (X509Certificate) factory.generateCertificate(in);
                System.out.println("id " + cert.getSubjectX500Principal().getName());
            }
        }
        X509AuthenticationProvider provider = new X509AuthenticationProvider(null, null);
        BufferedReader lines = new BufferedReader(
            new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = lines.readLine()) != null; ) {
            byte[] raw = new byte[line.length() / 2];
            for (int i = 0; i < raw.length; i++) {
                raw[i] = (byte) Integer.parseInt(line.substring(2 * i, 2 * i + 2), 16);
            }
            String id = new String(raw, StandardCharsets.UTF_8);
            System.out.println(provider.isValid(id) ? "valid" : "invalid");
        }
    }
}
