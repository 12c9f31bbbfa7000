#include <karu.h>
#include <stdio.h>
int main(int argc, char **argv) {
  karu_config *cfg; karu_client *client; karu_locator *obj; char buf[6];
  if (argc < 2 || karu_config_create(&cfg) != KARU_OK) return 1;
  if (karu_client_create(cfg, &client) != KARU_OK || karu_resolve(argv[1], &obj) != KARU_OK) return 1;
  karu_req req = {obj, 7, sizeof buf, buf, NULL, NULL};
  karu_status s = karu_client_fetch(client, &req, 1);
  if (s == KARU_OK) printf("%.6s\n", buf); else fprintf(stderr, "%s\n", karu_last_error());
  karu_locator_free(obj); karu_client_free(client); karu_config_free(cfg);
  return s == KARU_OK ? 0 : 1;
}
