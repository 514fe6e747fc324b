// The server side of SASL DIGEST-MD5 as Hadoop's servers run it: the
// JDK's own mechanism (javax.security.sasl), for the Go tests of package
// sasl (TestHadoopDigestSecurityLayersWithJava). Run with
// `java JavaDigestServer.java`; it reads commands on stdin, one a line,
// and answers each with one line on stdout, bytes in hex:
//
//	start QOP USER PASSWORD  -> challenge HEX   (USER, PASSWORD in hex)
//	response HEX             -> rspauth HEX     (the final challenge)
//	negotiated               -> negotiated QOP STRENGTH RAWSENDSIZE
//	unwrap HEX               -> plain HEX       (a message from the client)
//	wrap HEX                 -> wrapped HEX     (a message for the client)
//
// or "error TEXT" when the mechanism throws.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.Map;
import javax.security.auth.callback.Callback;
import javax.security.auth.callback.CallbackHandler;
import javax.security.auth.callback.NameCallback;
import javax.security.auth.callback.PasswordCallback;
import javax.security.auth.callback.UnsupportedCallbackException;
import javax.security.sasl.AuthorizeCallback;
import javax.security.sasl.RealmCallback;
import javax.security.sasl.Sasl;
import javax.security.sasl.SaslServer;

public class JavaDigestServer {
    static final HexFormat HEX = HexFormat.of();

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        SaslServer server = null;
        for (String line; (line = in.readLine()) != null; ) {
            String[] f = line.split(" ");
            try {
                switch (f[0]) {
                    case "start": {
                        String user = new String(HEX.parseHex(f[2]), StandardCharsets.UTF_8);
                        char[] password = new String(HEX.parseHex(f[3]), StandardCharsets.UTF_8).toCharArray();
                        Map<String, Object> props = new HashMap<>();
                        props.put(Sasl.QOP, f[1]);
                        // Hadoop's TOKEN servers: protocol "", server name "default".
                        server = Sasl.createSaslServer("DIGEST-MD5", "", "default", props, handler(user, password));
                        out.println("challenge " + HEX.formatHex(server.evaluateResponse(new byte[0])));
                        break;
                    }
                    case "response": {
                        byte[] fin = server.evaluateResponse(arg(f));
                        if (!server.isComplete()) {
                            throw new IllegalStateException("not complete after the response");
                        }
                        out.println("rspauth " + HEX.formatHex(fin == null ? new byte[0] : fin));
                        break;
                    }
                    case "negotiated":
                        out.println("negotiated " + server.getNegotiatedProperty(Sasl.QOP) + " "
                                + server.getNegotiatedProperty(Sasl.STRENGTH) + " "
                                + server.getNegotiatedProperty(Sasl.RAW_SEND_SIZE));
                        break;
                    case "unwrap": {
                        byte[] b = arg(f);
                        out.println("plain " + HEX.formatHex(server.unwrap(b, 0, b.length)));
                        break;
                    }
                    case "wrap": {
                        byte[] b = arg(f);
                        out.println("wrapped " + HEX.formatHex(server.wrap(b, 0, b.length)));
                        break;
                    }
                    default:
                        out.println("error unknown command " + f[0]);
                }
            } catch (Exception e) {
                out.println("error " + String.valueOf(e).replaceAll("\\s+", " "));
            }
        }
    }

    static byte[] arg(String[] f) {
        return f.length > 1 ? HEX.parseHex(f[1]) : new byte[0];
    }

    // handler answers for the one user, in realm "default", as Hadoop's
    // SaslDigestCallbackHandler does for a token: the password of the
    // name the client gave, and authorization for that same name.
    static CallbackHandler handler(String user, char[] password) {
        return callbacks -> {
            for (Callback cb : callbacks) {
                if (cb instanceof RealmCallback) {
                    RealmCallback rc = (RealmCallback) cb;
                    rc.setText(rc.getDefaultText());
                } else if (cb instanceof NameCallback) {
                    NameCallback nc = (NameCallback) cb;
                    if (!user.equals(nc.getDefaultName())) {
                        throw new IllegalArgumentException("unknown user " + nc.getDefaultName());
                    }
                    nc.setName(nc.getDefaultName());
                } else if (cb instanceof PasswordCallback) {
                    ((PasswordCallback) cb).setPassword(password);
                } else if (cb instanceof AuthorizeCallback) {
                    AuthorizeCallback ac = (AuthorizeCallback) cb;
                    ac.setAuthorized(ac.getAuthenticationID().equals(ac.getAuthorizationID()));
                    if (ac.isAuthorized()) {
                        ac.setAuthorizedID(ac.getAuthorizationID());
                    }
                } else {
                    throw new UnsupportedCallbackException(cb);
                }
            }
        };
    }
}
