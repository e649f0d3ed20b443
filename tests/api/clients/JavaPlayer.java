// A player built on Java's own java.net.http.HttpClient with its defaults (HTTP/2 preferred, so every
// cleartext request offers h2c): asks for an ad, fires its impression, prints both answers' status and body.
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;

public class JavaPlayer {
    public static void main(String[] args) throws Exception {
        String base = args[0], key = args[1], body = args[2];
        HttpClient client = HttpClient.newHttpClient();
        HttpRequest ask = HttpRequest.newBuilder(URI.create(base + "/api/v1/ad/request"))
            .header("Ssp-Key", key)
            .header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(body))
            .build();
        HttpResponse<String> ad = client.send(ask, HttpResponse.BodyHandlers.ofString());
        System.out.println(ad.statusCode() + " " + ad.version());
        System.out.println(ad.body());
        String uuid = ad.body().replaceAll("(?s).*\"ad_request_uuid\":\"([0-9a-f-]+)\".*", "$1");
        HttpRequest fire = HttpRequest.newBuilder(URI.create(base + "/api/v1/ad/callback/?ad_request_uuid=" + uuid))
            .GET()
            .build();
        HttpResponse<String> pixel = client.send(fire, HttpResponse.BodyHandlers.ofString());
        System.out.println(pixel.statusCode() + " " + pixel.version());
        System.out.println(pixel.body());
    }
}
