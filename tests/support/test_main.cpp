// The doctest runner shared by every test executable. A test case that cannot run here calls
// SGP_SKIP (skip.hpp); after the run, if nothing failed but something was skipped, the runner
// lists each skipped case with its reason and exits 77 so that meson reports SKIP, not OK.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <map>
#include <string>

#include "skip.hpp"

namespace {

std::string g_current_test;                    // the test case running now
std::map<std::string, std::string> g_skipped;  // test case -> why it did not run

// Tells record_skip() which test case is running.
struct CurrentTestListener : doctest::IReporter {
  explicit CurrentTestListener(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_start(const doctest::TestCaseData& data) override { g_current_test = data.m_name; }
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};
REGISTER_LISTENER("sgp_current_test", 1, CurrentTestListener);

}  // namespace

void sgp::testing::record_skip(const std::string& reason) {
  g_skipped.emplace(g_current_test, reason);
}

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  const int failed = context.run();
  if (context.shouldExit() || failed != 0) return failed;
  if (g_skipped.empty()) return 0;
  for (const auto& [test, reason] : g_skipped)
    std::printf("SKIPPED: %s: %s\n", test.c_str(), reason.c_str());
  constexpr int kSkipped = 77;  // the exit status meson (and automake) report as SKIP
  return kSkipped;
}
